package grabtransport_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/grab-service/internal/grab"
)

// The start gate (seed 000): before its start a promotion is refused NOT_STARTED
// from the local cache, its shard asked about once per RefusalTTL however many
// buyers press early; at the start instant grabs go through at once (a cached
// NOT_STARTED never holds past the start, whatever its age), on each instance by
// its own clock.
func TestStartGate(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(_ *grab.Config, d *grab.Deps) { d.Metrics = grab.NewMetrics(reg) })
	start := e.clock.Now().Add(time.Hour).Truncate(time.Millisecond)
	id := e.promotion("gate", spec{total: 100, maxPerGrab: 1, start: start, end: start.Add(time.Hour)})

	const early = 300
	began := time.Now()
	for i := range early {
		a := e.grabAttempt(grabBody(fmt.Sprintf("gate-%d", i), fmt.Sprintf("gate-pin-%d", i), "10.8.0.1", id, 1), "1")
		if a.status != http.StatusConflict || a.res.Result != grab.NotStarted {
			t.Fatalf("early grab %d: %d %s, want 409 NOT_STARTED", i, a.status, a.raw)
		}
	}
	fromCache := counter(t, reg, "flashsale_grab_short_circuit_total", "NOT_STARTED")
	asked := early - int(fromCache)
	// One read when the cache is empty, one more each time its entry lapses.
	bound := 1 + int(time.Since(began)/e.cfg.RefusalTTL)
	t.Logf("%d early grabs in %s: %d asked the shard, %d answered from the cache", early, time.Since(began).Round(time.Millisecond), asked, int(fromCache))
	if asked < 1 || asked > bound {
		t.Fatalf("%d early grabs asked the shard %d times; want 1 to %d (one per %s)", early, asked, bound, e.cfg.RefusalTTL)
	}
	if h := e.hash(id); h.Remaining != 100 || h.WinCount != 0 {
		t.Fatalf("early grabs touched the promotion: remaining %d, window count %d", h.Remaining, h.WinCount)
	}

	// 100 ms before the start the cache takes a fresh NOT_STARTED (the last entry
	// has lapsed by then); the clock reaches the start well within its RefusalTTL.
	// The clock stands still between the steps: however slow the machine, the grabs
	// before the start are made before it, and the cached NOT_STARTED is 100 ms old,
	// not lapsed, at the start.
	e.clock.Freeze(start.Add(-100 * time.Millisecond))
	for i := range 2 {
		if a := e.grabAttempt(grabBody(fmt.Sprintf("gate-before-%d", i), "gate-pin-b", "10.8.0.1", id, 1), "1"); a.res.Result != grab.NotStarted {
			t.Fatalf("100 ms before the start: %d %s", a.status, a.raw)
		}
	}
	e.clock.Rewind(start)
	if a := e.grabAttempt(grabBody("gate-open", "gate-pin-open", "10.8.0.1", id, 1), "1"); a.res.Result != grab.Granted {
		t.Fatalf("at the start instant: %d %s, want GRANTED", a.status, a.raw)
	}
}

// counter is the value of a counter with one label value, 0 when absent.
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
