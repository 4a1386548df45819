package httpx

import (
	"context"
	"net/http"
	"net/http/pprof"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports whether one dependency needed to serve is usable.
type Check func(ctx context.Context) error

// checkDeadline bounds one round of checks.
const checkDeadline = 2 * time.Second

// Probes mounts the ops listener's /healthz and /readyz on mux. /readyz runs every
// check with a short deadline, all at once, and answers 503 naming each failing
// dependency; advisory checks are reported under "degraded" but leave the instance
// ready: a service that still serves most requests without a dependency (one Redis
// shard of sixteen, say) must stay in its load balancer, or one lost shard empties
// the fleet. info, when set, adds facts an operator wants beside readiness (the md5
// of the switches in force) under "info", ready or not.
func Probes(mux *http.ServeMux, info func() map[string]any, required, advisory map[string]Check) {
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), checkDeadline)
		defer cancel()
		failing, degraded := runChecks(ctx, required), runChecks(ctx, advisory)
		if len(failing) > 0 {
			names := make([]string, 0, len(failing))
			for n := range failing {
				names = append(names, n)
			}
			sort.Strings(names)
			body := map[string]any{"status": "not ready", "failing": names, "errors": failing}
			addDetails(body, info, degraded)
			WriteJSON(w, http.StatusServiceUnavailable, body)
			return
		}
		body := map[string]any{"status": "ready"}
		addDetails(body, info, degraded)
		WriteJSON(w, http.StatusOK, body)
	})
}

// PublicProbes mounts the public listener's /healthz and /readyz. Anyone may ask
// these, so /readyz says only ready or not ready (names, addresses and switches are
// the ops listener's), and its checks run at most once per PublicReadyMaxAge
// however many ask: a flood of probes must not become a flood on the backends.
func PublicProbes(mux *http.ServeMux, required map[string]Check) {
	cache := &readyCache{checks: required, maxAge: PublicReadyMaxAge, now: time.Now}
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if cache.ready(r.Context()) {
			WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
			return
		}
		WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready"})
	})
}

// PublicReadyMaxAge is how old a public /readyz answer's checks may be.
const PublicReadyMaxAge = time.Second

func healthz(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyCache keeps the last verdict of checks; askers past maxAge share one run.
type readyCache struct {
	checks  map[string]Check
	maxAge  time.Duration
	now     func() time.Time
	mu      sync.Mutex
	at      time.Time     // when the verdict was reached; zero: never
	verdict bool          // every check passed
	running chan struct{} // closed when the run in progress ends; nil: none
}

// ready is the verdict, fresh or waited for. A caller that gives up waiting gets
// the last verdict (not ready before the first).
func (c *readyCache) ready(ctx context.Context) bool {
	c.mu.Lock()
	if !c.at.IsZero() && c.now().Sub(c.at) < c.maxAge {
		defer c.mu.Unlock()
		return c.verdict
	}
	if c.running == nil {
		c.running = make(chan struct{})
		go c.run(c.running)
	}
	running := c.running
	c.mu.Unlock()
	select {
	case <-running:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verdict
}

// run runs the checks on a context of its own: the asker that started it may go
// away, and the others wait on the same run.
func (c *readyCache) run(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), checkDeadline)
	defer cancel()
	ok := len(runChecks(ctx, c.checks)) == 0
	c.mu.Lock()
	c.verdict, c.at, c.running = ok, c.now(), nil
	c.mu.Unlock()
	close(done)
}

// OpsHandler is the handler of a service's ops listener (--ops-listen), never of
// its public one: /metrics, the probes again (so a scraper and a prober need one
// port), and with pprof the runtime profiles under /debug/pprof/. Metrics name
// what a process holds and profiles cost it CPU on demand, so neither faces the
// internet; the network policies admit only Prometheus to this port.
func OpsHandler(reg *prometheus.Registry, probes func(*http.ServeMux), pprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if probes != nil {
		probes(mux)
	}
	if pprof {
		mountPprof(mux)
	}
	return RouteFallback(mux)
}

// mountPprof serves the runtime profiles under /debug/pprof/:
// go tool pprof http://127.0.0.1:9180/debug/pprof/profile?seconds=10
func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

// runChecks runs every check at once, so one dependency that hangs until the
// deadline does not make the others look down, and returns the failures by name.
func runChecks(ctx context.Context, checks map[string]Check) map[string]string {
	failing := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, check := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := check(ctx); err != nil {
				mu.Lock()
				failing[name] = err.Error()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failing
}

func addDetails(body map[string]any, info func() map[string]any, degraded map[string]string) {
	if info != nil {
		body["info"] = info()
	}
	if len(degraded) > 0 {
		body["degraded"] = degraded
	}
}
