// Package httpx holds the HTTP concerns both services share: the contract's error
// body and status mapping, strict JSON decoding, bearer-token roles, request ids,
// Prometheus route metrics and the health endpoints.
package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// Error is the contract's Error object, and the one error type handlers return to
// the client. Status is the HTTP status it travels with.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// RetryAfter, when set, travels as the Retry-After header (whole seconds,
	// rounded up).
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Code + ": " + e.Field + ": " + e.Message
	}
	return e.Code + ": " + e.Message
}

// Invalid is a 400 INVALID_REQUEST naming the offending field.
func Invalid(field, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "INVALID_REQUEST", Field: field, Message: msg}
}

// Constructors for the other codes of the contract.
func NotFound(msg string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: msg}
}
func Conflict(code, msg string) *Error {
	return &Error{Status: http.StatusConflict, Code: code, Message: msg}
}
func Unavailable(msg string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: msg}
}

// RateLimited is a 429 RATE_LIMITED (the code grab answers carry for the same
// refusal) telling the client when to retry.
func RateLimited(msg string, retryAfter time.Duration) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: "RATE_LIMITED", Message: msg, RetryAfter: retryAfter}
}

var (
	errUnauthorized = &Error{Status: http.StatusUnauthorized, Code: "UNAUTHORIZED", Message: "missing or unknown bearer token"}
	errForbidden    = &Error{Status: http.StatusForbidden, Code: "FORBIDDEN", Message: "this token lacks the role the route needs"}
	errTooLarge     = &Error{Status: http.StatusRequestEntityTooLarge, Code: "PAYLOAD_TOO_LARGE", Message: "body larger than 64 KiB"}
	errInternal     = &Error{Status: http.StatusInternalServerError, Code: "INTERNAL", Message: "internal error; see the service log"}
)

// AsError maps any error to the contract's Error: an *Error (even wrapped) as it is,
// a cancelled or timed-out context as 503, anything else as 500 INTERNAL.
func AsError(err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return Unavailable("the request timed out; nothing was changed that will not be repaired")
	}
	return errInternal
}

// WriteJSON writes v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header()["Content-Type"] = contentTypeJSON
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteJSONBytes writes body as given, a JSON value already encoded and ended by
// a newline as WriteJSON's are: for the hot paths that encode without reflection
// (package jsonx).
func WriteJSONBytes(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = contentTypeJSON
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// contentTypeJSON is set as the header's value by assignment, shared by every
// answer: Header.Set would canonicalize the name and allocate the value each time.
// net/http only reads it; nothing may write into it (Header.Set replaces the
// slice, which is fine; h["Content-Type"][0] = ... would change every answer).
var contentTypeJSON = []string{"application/json; charset=utf-8"}

// WriteError writes err as the contract's Error body. It is the single error
// encoder of both services (go-kit's ServerErrorEncoder points here).
func WriteError(_ context.Context, err error, w http.ResponseWriter) {
	e := AsError(err)
	SetRetryAfter(w, e.RetryAfter)
	WriteJSON(w, e.Status, e)
}
