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

// Probes mounts /healthz and /readyz on mux. /readyz runs every check with a
// short deadline, all at once, and answers 503 naming each failing dependency;
// advisory checks are reported under "degraded" but leave the instance ready: a
// service that still serves most requests without a dependency (one Redis shard of
// sixteen, say) must stay in its load balancer, or one lost shard empties the
// fleet. info, when set, adds facts an operator wants beside readiness (the md5 of
// the switches in force) under "info", ready or not.
func Probes(mux *http.ServeMux, info func() map[string]any, required, advisory map[string]Check) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
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
