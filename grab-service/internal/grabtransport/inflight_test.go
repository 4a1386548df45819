package grabtransport_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flashsale/platform/grab-service/internal/grab"
)

// A checkout that gave up on a slow send and sent the same grab again must not be
// told a definite refusal while the first send may still be granted. Here the first
// send claims its requestId and stalls (a fault point) before its take; another buyer
// takes the last unit; the second send finds it sold out and answers 503
// UNAVAILABLE, retry, not a definite 409 SOLD_OUT; the other buyer cancels, the first
// send goes on and is granted, and a retry answers GRANTED, the one outcome of the
// requestId.
func TestResendWhileTheFirstIsInFlight(t *testing.T) {
	t.Parallel()
	stall, resume := make(chan struct{}), make(chan struct{})
	var stalled atomic.Bool
	e := newEnv(t, func(cfg *grab.Config, d *grab.Deps) {
		cfg.FoldClaim = false // the first send stalls between its claim and its take
		d.Fault = func(p string) error {
			if p == "after-claim" && stalled.CompareAndSwap(false, true) { // the first send only
				close(stall)
				<-resume
			}
			return nil
		}
	})
	release := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release) // after a failure too, before the env's clean-up waits for the first send
	id := e.promotion("inflight", spec{total: 1})
	first := make(chan answer, 1)
	go func() { first <- e.grab(grabBody("x", "erin", "10.0.0.9", id, 1)) }()
	<-stall
	// Another buyer takes the last unit.
	if a := e.grab(grabBody("other", "finn", "10.0.0.8", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("the other buyer: %d %s", a.status, a.raw)
	}
	if a := e.grab(grabBody("x", "erin", "10.0.0.9", id, 1)); a.status != http.StatusServiceUnavailable || a.res.Result != grab.Unavailable {
		t.Fatalf("the resend while the first send is in flight: %d %s, want 503 UNAVAILABLE", a.status, a.raw)
	}
	if a := e.cancel("other", "finn"); a.status != http.StatusOK {
		t.Fatalf("the other buyer's cancel: %d %s", a.status, a.raw)
	}
	release()
	if a := <-first; a.res.Result != grab.Granted {
		t.Fatalf("the first send: %d %s, want GRANTED", a.status, a.raw)
	}
	if a := e.grab(grabBody("x", "erin", "10.0.0.9", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("a retry after both: %d %s, want the replay of the grant", a.status, a.raw)
	}
}
