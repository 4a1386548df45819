package grabtransport_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/grab-service/internal/grab"
)

// The status route is public: a flood of distinct promotion ids, each a read of a
// shard and an entry of the cache, is held to the instance's status rate and
// answered 429 RATE_LIMITED past it, in the contract's Error body with
// Retry-After. An answer the cache holds costs neither and is never refused.
func TestStatusRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *grab.Config, _ *grab.Deps) {
		// One read, then the next a hundred seconds of the service's clock later:
		// the test moves that clock, so the wall clock's pace cannot refill it.
		c.StatusRate = 0.01
		c.StatusTTL = time.Hour // the cached answer stays while the test runs
	})
	status := func(id string) answer { return e.do("GET", "/v1/promotions/"+id+"/1/status", "", nil) }
	live := e.promotion("limited", spec{total: 3})
	if r := status(live); r.status != 200 {
		t.Fatalf("first status: %d %s", r.status, r.raw)
	}

	missing := "flood-" + e.suffix
	r := status(missing)
	want := `{"code":"RATE_LIMITED","message":"` + grab.ErrStatusRateLimited.Error() + `"}` + "\n"
	if r.status != 429 || r.raw != want || r.header.Get("Retry-After") != "1" {
		t.Fatalf("a read past the rate: %d Retry-After %q %q; want 429, 1 and %q", r.status, r.header.Get("Retry-After"), r.raw, want)
	}
	for i := range 20 {
		if r := status(live); r.status != 200 {
			t.Fatalf("cached status %d while at the rate: %d %s; answers from the cache are not limited", i, r.status, r.raw)
		}
	}
	if _, m := e.opsGet("/metrics"); !strings.Contains(m, `flashsale_grab_http_requests_total{code="429",route="status"} 1`) {
		t.Errorf("the 429 is not counted in the route metrics")
	}

	e.clock.Advance(100 * time.Second) // one token back
	if r := status(missing); r.status != 404 || r.err.Code != "NOT_FOUND" {
		t.Fatalf("the read a token later: %d %s; want 404 NOT_FOUND", r.status, r.raw)
	}
	if r := status(missing); r.status != 404 {
		t.Fatalf("the cached NOT_FOUND: %d %s", r.status, r.raw)
	}
	if r := status("other-" + e.suffix); r.status != 429 {
		t.Fatalf("another id with no token left: %d %s; want 429", r.status, r.raw)
	}
}

// A flood that holds the status limit does not refuse a live promotion whose
// cached answer just lapsed: its last answer stands in for grab.StatusStale past
// its time, and only then is it refused like any id the limit cannot read.
func TestStatusRateLimitServesALapsedAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *grab.Config, _ *grab.Deps) {
		c.StatusRate = 0.01 // one read, then none until the clock moves 100 s
		c.StatusTTL = time.Second
	})
	status := func(id string) answer { return e.do("GET", "/v1/promotions/"+id+"/1/status", "", nil) }
	live := e.promotion("lapsed", spec{total: 3})
	// The clock stands still but for the test's moves, so the lapsed answer is
	// exactly half its stale keep past its life below, however slow the machine.
	e.clock.Freeze(e.clock.Now())
	first := status(live)
	if first.status != 200 {
		t.Fatalf("first status: %d %s", first.status, first.raw)
	}
	if r := status("flood-" + e.suffix); r.status != 429 {
		t.Fatalf("the flood's read past the rate: %d %s", r.status, r.raw)
	}
	e.clock.Advance(time.Second + grab.StatusStale/2) // lapsed, within the stale keep; no token yet
	if r := status(live); r.status != 200 || r.raw != first.raw {
		t.Fatalf("a lapsed answer while at the rate: %d %s; want the last answer, %s", r.status, r.raw, first.raw)
	}
	e.clock.Advance(grab.StatusStale) // past the keep, still no token
	if r := status(live); r.status != 429 {
		t.Fatalf("past its stale keep at the rate: %d %s; want 429", r.status, r.raw)
	}
}
