// Package grabendpoint adapts the grab service to go-kit endpoints, with the
// per-instance method rate limits stacked in one place.
package grabendpoint

import (
	"context"
	"time"

	"github.com/go-kit/kit/endpoint"
	"golang.org/x/time/rate"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grab"
)

// CancelRequest is a decoded cancel.
type CancelRequest struct {
	RequestID, Pin, Reason string
}

// ConfirmRequest is a decoded confirm of a held grant.
type ConfirmRequest struct {
	RequestID, Pin string
}

// StatusRequest is a decoded status query.
type StatusRequest struct {
	PromoID string
	Type    int
}

// Set holds the service's endpoints.
type Set struct {
	Grab, Cancel, Confirm, Status endpoint.Endpoint
}

// New wires the endpoints. The method limiter answers RATE_LIMITED in the response,
// like every refusal, so nothing placed around it would count limiting as failure.
// adm (nil: none) bounds the grabs and cancels in flight; a request the limiter
// refuses never takes one of its slots.
func New(svc grab.Service, switches *configcenter.Holder, adm *Admission) Set {
	grabLimit := &methodLimiter{get: func(s *configcenter.Snapshot) float64 { return s.MethodLimits.Grab }, switches: switches}
	cancelLimit := &methodLimiter{get: func(s *configcenter.Snapshot) float64 { return s.MethodLimits.Cancel }, switches: switches}
	var grabEP endpoint.Endpoint = func(ctx context.Context, req any) (any, error) {
		return svc.Grab(ctx, req.(grab.Request))
	}
	grabID := func(req any) string { return req.(grab.Request).RequestID }
	grabLimit.spare = func(ctx context.Context, req any) (bool, error) { return svc.Resend(ctx, req.(grab.Request)) }
	grabEP = grabLimit.middleware(grabID)(adm.middleware("grab", grabID)(grabEP))

	var cancelEP endpoint.Endpoint = func(ctx context.Context, req any) (any, error) {
		r := req.(CancelRequest)
		return svc.Cancel(ctx, r.RequestID, r.Pin, r.Reason)
	}
	cancelID := func(req any) string { return req.(CancelRequest).RequestID }
	cancelEP = cancelLimit.middleware(cancelID)(adm.middleware("cancel", cancelID)(cancelEP))

	// A confirm is the cancel's kin (one per grant, after it): the same limits.
	var confirmEP endpoint.Endpoint = func(ctx context.Context, req any) (any, error) {
		r := req.(ConfirmRequest)
		return svc.Confirm(ctx, r.RequestID, r.Pin)
	}
	confirmID := func(req any) string { return req.(ConfirmRequest).RequestID }
	confirmEP = cancelLimit.middleware(confirmID)(adm.middleware("confirm", confirmID)(confirmEP))

	statusEP := func(ctx context.Context, req any) (any, error) {
		r := req.(StatusRequest)
		return svc.Status(ctx, r.PromoID, r.Type)
	}
	return Set{Grab: grabEP, Cancel: cancelEP, Confirm: confirmEP, Status: statusEP}
}

// methodLimiter is a per-instance token bucket whose rate follows the switches:
// a change of methodLimits applies on the next request, without a restart.
type methodLimiter struct {
	get      func(*configcenter.Snapshot) float64
	switches *configcenter.Holder
	limiter  *rate.Limiter // rate.Limiter is safe for concurrent SetLimit and Allow
	// spare, when set, lets through a request the limit would refuse: a resend of a
	// grab that may hold a grant is answered its outcome, not a definite 429.
	spare func(ctx context.Context, req any) (bool, error)
}

func (m *methodLimiter) middleware(requestID func(any) string) endpoint.Middleware {
	m.limiter = rate.NewLimiter(rate.Inf, 1)
	return func(next endpoint.Endpoint) endpoint.Endpoint {
		return func(ctx context.Context, req any) (any, error) {
			perSecond := m.get(m.switches.Load())
			if perSecond <= 0 {
				return next(ctx, req)
			}
			if lim := rate.Limit(perSecond); m.limiter.Limit() != lim {
				m.limiter.SetLimit(lim)
				m.limiter.SetBurst(max(1, int(perSecond/10))) // a tenth of a second's worth
			}
			if m.limiter.Allow() {
				return next(ctx, req)
			}
			return m.overLimit(ctx, req, requestID(req), next)
		}
	}
}

// overLimit answers a request past the limit: RATE_LIMITED, unless it is a resend
// that may hold a grant (spare), which goes on to its outcome; when the request
// index cannot tell, UNAVAILABLE, so nothing passes the limit on a guess.
func (m *methodLimiter) overLimit(ctx context.Context, req any, rid string, next endpoint.Endpoint) (any, error) {
	if m.spare != nil {
		switch resend, err := m.spare(ctx, req); {
		case err != nil:
			return grab.IndexSilent(rid), nil
		case resend:
			return next(ctx, req)
		}
	}
	return grab.Result{RequestID: rid, Result: grab.RateLimited,
		Message: "method rate limit of this instance reached", RetryAfter: time.Second}, nil
}
