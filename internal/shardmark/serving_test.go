package shardmark

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
)

// AwaitServing returns once every live instance has reported serving the shard
// from a read after the call began; instances silent past ReportStale are not
// waited for, those gone past a minute are removed, and a live instance that keeps
// refusing fails the wait by name.
func TestAwaitServingWaitsForEveryLiveInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.StartRedis(t, testenv.Volatile).Client()
	serverNow := func() time.Time { return c.Time(ctx).Val() }
	report := func(instance string, at time.Time, serving bool) {
		t.Helper()
		if err := Report(ctx, c, shard, instance, at, serving); err != nil {
			t.Fatal(err)
		}
	}

	if served, err := AwaitServing(ctx, c, shard, time.Second, time.Millisecond); err != nil || len(served) != 0 {
		t.Fatalf("no instance reports: %v %v, want nothing to wait for", served, err)
	}

	report("gone", serverNow().Add(-2*reportForget), false)
	report("silent", serverNow().Add(-2*ReportStale), false)
	report("a", serverNow(), false)    // saw the fence
	report("b", serverNow(), true)     // serving, but from a read before the wait began
	report("junk", time.Time{}, false) // overwritten below with a malformed value
	c.HSet(ctx, promo.ServingKey(shard), "junk", "not a report")
	done := make(chan struct{})
	var served []string
	var err error
	go func() {
		defer close(done)
		served, err = AwaitServing(ctx, c, shard, 30*time.Second, time.Millisecond) // a bound on the wait, ended by the reports below
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case <-done:
		t.Fatalf("returned while a and b had not reported serving since: %v %v", served, err)
	default:
	}
	report("a", serverNow(), true)
	time.Sleep(50 * time.Millisecond)
	select {
	case <-done:
		t.Fatalf("returned while b had not reported serving since the wait began: %v %v", served, err)
	default:
	}
	report("b", serverNow(), true)
	<-done
	if err != nil || strings.Join(served, ",") != "a,b" {
		t.Fatalf("served by %v (%v), want a,b", served, err)
	}
	left := c.HKeys(ctx, promo.ServingKey(shard)).Val()
	for _, k := range left {
		if k == "gone" || k == "junk" {
			t.Fatalf("report %q not removed: %v", k, left)
		}
	}

	// A live instance that keeps refusing: the wait fails, naming it.
	report("stuck", serverNow(), false)
	// The reporter is a goroutine of its own: it must not call t.Fatal (only the
	// test's goroutine may), and the test waits for it before the client closes.
	stop := make(chan struct{})
	stopped := make(chan error, 1)
	go func() { // keeps reporting, as a live but fenced instance does
		for {
			select {
			case <-stop:
				stopped <- nil
				return
			case <-time.After(20 * time.Millisecond):
				if err := Report(ctx, c, shard, "stuck", serverNow(), false); err != nil {
					stopped <- err
					return
				}
			}
		}
	}()
	_, err = AwaitServing(ctx, c, shard, 300*time.Millisecond, 10*time.Millisecond)
	close(stop)
	if rerr := <-stopped; rerr != nil {
		t.Fatalf("reporting for the stuck instance: %v", rerr)
	}
	if err == nil || !strings.Contains(err.Error(), "stuck") {
		t.Fatalf("a live instance refusing the shard: %v, want an error naming it", err)
	}
}

// Read stamps the markers with the server's clock, taken before them.
func TestReadStampsTheServerTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.StartRedis(t, testenv.Volatile).Client()
	before := c.Time(ctx).Val()
	st := read(t, c)
	if st.ServerTime.Before(before) || st.ServerTime.After(c.Time(ctx).Val()) {
		t.Fatalf("server time %v not between the reads around it (from %v)", st.ServerTime, before)
	}
}
