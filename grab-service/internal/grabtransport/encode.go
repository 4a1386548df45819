package grabtransport

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/internal/httpx"
)

// encodeError is the one error encoder: it maps the service's errors to the
// contract's codes and lets httpx.WriteError write the body (and Retry-After).
func encodeError(ctx context.Context, err error, w http.ResponseWriter) {
	httpx.WriteError(ctx, contractError(err), w)
}

func contractError(err error) error {
	var fe *httpx.FieldError
	switch {
	case errors.As(err, &fe):
		return httpx.Invalid(fe.Field, fe.Msg)
	case errors.Is(err, grab.ErrPromotionNotFound), errors.Is(err, grab.ErrGrabNotFound):
		return httpx.NotFound(err.Error())
	case errors.Is(err, grab.ErrStatusRateLimited):
		return httpx.RateLimited(err.Error(), time.Second)
	}
	return err
}

// statusOf maps a result to the contract's HTTP status.
func statusOf(o grab.Outcome) int {
	switch o {
	case grab.Granted, grab.Returned, grab.Confirmed:
		return http.StatusOK
	case grab.RateLimited:
		return http.StatusTooManyRequests
	case grab.Blocked:
		return http.StatusForbidden
	case grab.Degraded, grab.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusConflict
}

// encodeGrab answers a replayed grab that was since returned with 409: a 200 from
// the grab route always means GRANTED to the checkout service.
func encodeGrab(ctx context.Context, w http.ResponseWriter, resp any) error {
	res := resp.(grab.Result)
	if res.Result == grab.AlreadyReturned {
		writeResult(w, http.StatusConflict, res)
		return nil
	}
	return encodeResult(ctx, w, res)
}

func encodeResult(_ context.Context, w http.ResponseWriter, resp any) error {
	res := resp.(grab.Result)
	if res.Result == grab.AlreadyReturned {
		writeResult(w, http.StatusOK, res)
		return nil
	}
	writeResult(w, statusOf(res.Result), res)
	return nil
}

// encodeConfirm answers a confirm: CONFIRMED 200; ALREADY_RETURNED is a 409 here
// (the hold ran out), not the cancel's 200.
func encodeConfirm(_ context.Context, w http.ResponseWriter, resp any) error {
	res := resp.(grab.Result)
	writeResult(w, statusOf(res.Result), res)
	return nil
}

// writeResult writes res without reflection, in a pooled buffer: every grab is
// answered with one. Write copies what it is given, so the buffer goes back at
// once, unless a result of many items grew it past what answers usually need.
func writeResult(w http.ResponseWriter, status int, res grab.Result) {
	httpx.SetRetryAfter(w, res.RetryAfter)
	bp := resultBufs.Get().(*[]byte)
	*bp = append(res.AppendJSON((*bp)[:0]), '\n')
	httpx.WriteJSONBytes(w, status, *bp)
	if cap(*bp) <= 4<<10 {
		resultBufs.Put(bp)
	}
}

var resultBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func encodeStatus(_ context.Context, w http.ResponseWriter, resp any) error {
	w.Header().Set("Cache-Control", "public, max-age=1")
	httpx.WriteJSON(w, http.StatusOK, resp)
	return nil
}
