package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Client is the checkout service's client of grab-service: grabs, their cancels
// and confirms, and the public status. It is safe for concurrent use.
type Client struct {
	e *endpoint
}

// New returns a client of grab-service at c.BaseURL, sending c.Token (the
// checkout service's).
func New(c Config) (*Client, error) {
	e, err := newEndpoint(c)
	if err != nil {
		return nil, err
	}
	return &Client{e: e}, nil
}

// Grab takes qualification for every item of req, all or nothing. It returns the
// GRANTED answer, or an *Error: a refusal (Result SOLD_OUT, PIN_LIMIT, ...;
// Error.Refused), a request the service did not serve (Code), or the last answer
// when the retries ran out (then Error.Unknown says whether the grab may stand).
//
// The body is encoded once and every retry sends it byte for byte under the same
// requestId, numbered by X-Grab-Attempt (1, 2, ...; from 2 when req.Resend is
// set), so a retry answers the first send's outcome and takes nothing twice. A
// transport error, 5xx or 503 UNAVAILABLE is retried with backoff and jitter, a
// 429 after its Retry-After, until ctx's deadline or the policy's attempts.
func (c *Client) Grab(ctx context.Context, req GrabRequest) (*Answer, error) {
	if req.RequestID == "" {
		return nil, &Error{Op: OpGrab, FailedItem: -1, Err: fmt.Errorf("the grab has no requestId")}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, &Error{Op: OpGrab, FailedItem: -1, Err: fmt.Errorf("encode the grab: %w", err)}
	}
	first := 1
	if req.Resend {
		first = 2
	}
	return c.answer(ctx, request{op: OpGrab, method: http.MethodPost, path: "/v1/grab", body: body,
		rid: req.RequestID, grabAttempt: first, judge: judgeGrab})
}

// Cancel returns the qualification a granted grab took. Its answer is RETURNED,
// or ALREADY_RETURNED when the grant was returned before (by an earlier cancel, a
// retry of this one whose first answer was lost, or an expired hold): both mean
// the grant is returned. An empty reason is sent as none (USER_CANCELLED).
// 503, 5xx and transport errors are retried: a cancel is idempotent.
func (c *Client) Cancel(ctx context.Context, requestID, pin string, reason CancelReason) (*Answer, error) {
	body, err := json.Marshal(struct {
		Pin    string       `json:"pin"`
		Reason CancelReason `json:"reason,omitempty"`
	}{pin, reason})
	if err != nil {
		return nil, &Error{Op: OpCancel, FailedItem: -1, Err: err}
	}
	return c.answer(ctx, request{op: OpCancel, method: http.MethodPost, body: body, rid: requestID,
		path: "/v1/grab/" + url.PathEscape(requestID) + "/cancel", judge: judgeReturn})
}

// Confirm keeps a held grant (a grab sent with HoldSeconds) for good: CONFIRMED,
// also for a grant confirmed before or granted without a hold. A hold that ran
// out is an *Error with Result ALREADY_RETURNED. 503s are retried: until
// CONFIRMED the hold stands as it was.
func (c *Client) Confirm(ctx context.Context, requestID, pin string) (*Answer, error) {
	body, err := json.Marshal(struct {
		Pin string `json:"pin"`
	}{pin})
	if err != nil {
		return nil, &Error{Op: OpConfirm, FailedItem: -1, Err: err}
	}
	return c.answer(ctx, request{op: OpConfirm, method: http.MethodPost, body: body, rid: requestID,
		path: "/v1/grab/" + url.PathEscape(requestID) + "/confirm", judge: judgeReturn})
}

// Status is a promotion's public status, as the detail page polls it: from a
// cache of at most a second in each grab-service instance. Sent without a token.
func (c *Client) Status(ctx context.Context, promoID string, typ int) (*PromotionStatus, error) {
	a, n, err := c.e.do(ctx, request{op: OpStatus, method: http.MethodGet, public: true,
		path: "/v1/promotions/" + url.PathEscape(promoID) + "/" + strconv.Itoa(typ) + "/status", judge: judgeRead})
	if err != nil {
		return nil, err
	}
	var s PromotionStatus
	if err := decode(OpStatus, a, n, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// answer runs a grab, cancel or confirm and returns its GrabResult.
func (c *Client) answer(ctx context.Context, r request) (*Answer, error) {
	a, n, err := c.e.do(ctx, r)
	if err != nil {
		return nil, err
	}
	return &Answer{RequestID: a.body.RequestID, Result: a.body.Result, Items: a.body.Items, Message: a.body.Message, Attempts: n}, nil
}
