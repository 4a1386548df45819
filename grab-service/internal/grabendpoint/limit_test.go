package grabendpoint

import (
	"context"
	"errors"
	"testing"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grab"
)

// A request past the method limit goes on only as a resend that may hold a grant;
// when the request index cannot say (spare fails: the index is the test's own
// function, a Redis error being what grab's TestAnUnknownResendFailsClosed makes
// real), it is answered UNAVAILABLE, nothing taken, and never passed on a guess.
func TestMethodLimitFailsClosedOnAnUnknownResend(t *testing.T) {
	switches := configcenter.NewHolder()
	snap, err := configcenter.Parse([]byte(`{"methodLimits": {"grab": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	switches.Store(snap)
	for _, c := range []struct {
		name   string
		spare  func(context.Context, any) (bool, error)
		passed int // calls past the limit that reached the endpoint
		want   grab.Outcome
	}{
		{"index silent", func(context.Context, any) (bool, error) { return false, errors.New("index shard down") }, 0, grab.Unavailable},
		{"a resend", func(context.Context, any) (bool, error) { return true, nil }, 1, grab.Granted},
		{"no claim", func(context.Context, any) (bool, error) { return false, nil }, 0, grab.RateLimited},
	} {
		calls := 0
		next := func(context.Context, any) (any, error) {
			calls++
			return grab.Result{RequestID: "r", Result: grab.Granted}, nil
		}
		m := &methodLimiter{get: func(s *configcenter.Snapshot) float64 { return s.MethodLimits.Grab }, switches: switches, spare: c.spare}
		ep := m.middleware(func(any) string { return "r" })(next)
		if _, err := ep(context.Background(), nil); err != nil || calls != 1 {
			t.Fatalf("%s: the first call, within the limit: %v, %d calls", c.name, err, calls)
		}
		out, err := ep(context.Background(), nil)
		res, _ := out.(grab.Result)
		if err != nil || res.Result != c.want || calls != 1+c.passed {
			t.Fatalf("%s: past the limit: %+v %v, %d calls; want %s", c.name, res, err, calls, c.want)
		}
		if c.want == grab.Unavailable && res.Decision != grab.NothingTaken {
			t.Fatalf("%s: decision %q, want NOTHING_TAKEN", c.name, res.Decision)
		}
	}
}
