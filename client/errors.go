package client

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Error is every failure of a call: a refusal (a GrabResult that is not the call's
// success: Result is set), a request the service did not serve (an Error body:
// Code is set), or no answer at all (StatusCode 0, Err is the transport's or the
// context's error). When the call was retried it describes the last answer.
type Error struct {
	Op         Op
	StatusCode int    // the last answer's HTTP status; 0 when no answer came
	Result     Result // the last answer's result, when its body was a GrabResult
	Code       Code   // the last answer's code, when its body was an Error
	// Decision tells a grab's UNAVAILABLE apart: ROLLED_BACK means the requestId
	// holds nothing and a new grab needs a new requestId.
	Decision Decision
	Message  string
	Field    string // of INVALID_REQUEST: the offending field, parameter or header
	// FailedItem is the index into the grab's items of the first item that
	// failed, or -1 when the answer names none.
	FailedItem int
	RetryAfter time.Duration // the last answer's Retry-After, when it had one
	Attempts   int           // sends made
	// Unknown reports that the call's effect is not known: a grab may have been
	// granted (or a cancel may have returned it) by a send whose answer was lost
	// or not yet decided. Send the same request again later (same requestId, same
	// body, Resend set) to learn it; do not reuse the requestId for anything else.
	Unknown bool
	// XRequestID is the last answer's X-Request-Id: the service logs under it.
	XRequestID string
	Err        error // the transport's or the context's error, when there was one
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "flashsale %s", e.Op)
	switch {
	case e.Result != "":
		fmt.Fprintf(&b, ": %d %s", e.StatusCode, e.Result)
	case e.Code != "":
		fmt.Fprintf(&b, ": %d %s", e.StatusCode, e.Code)
	case e.StatusCode != 0:
		fmt.Fprintf(&b, ": HTTP %d", e.StatusCode)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " (%s)", e.Field)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	if e.Unknown {
		b.WriteString("; outcome unknown, resend the same request to learn it")
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Refused reports a definite refusal: the service decided and nothing was taken
// or changed (a grab SOLD_OUT, PIN_LIMIT, BLOCKED, DEGRADED...; a confirm
// ALREADY_RETURNED). Retrying the same request answers the same.
func (e *Error) Refused() bool {
	if e.Result == "" || e.Unknown {
		return false
	}
	switch e.Result {
	case ResultUnavailable, ResultRateLimited:
		return false
	}
	return true
}

// ResultOf returns the result of err's last answer when err is an *Error whose
// answer was a GrabResult (a refusal), else "".
func ResultOf(err error) Result {
	var e *Error
	if errors.As(err, &e) {
		return e.Result
	}
	return ""
}

// CodeOf returns the code of err's last answer when err is an *Error whose answer
// was an Error body, else "".
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// OutcomeUnknown reports whether err leaves the call's effect unknown (Error.Unknown).
func OutcomeUnknown(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Unknown
}
