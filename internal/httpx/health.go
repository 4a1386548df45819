package httpx

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports whether one dependency needed to serve is usable.
type Check func(ctx context.Context) error

// Ops mounts /healthz, /readyz and /metrics on mux. /readyz runs every check with a
// short deadline, all at once, and answers 503 naming each failing dependency.
func Ops(mux *http.ServeMux, reg *prometheus.Registry, checks map[string]Check) {
	OpsWithInfo(mux, reg, nil, checks)
}

// OpsWithInfo is Ops whose /readyz body also carries info() under "info", ready
// or not: facts an operator wants beside readiness, such as the md5 of the
// switches document in force. info may be nil.
func OpsWithInfo(mux *http.ServeMux, reg *prometheus.Registry, info func() map[string]any, checks map[string]Check) {
	OpsReadiness(mux, reg, info, checks, nil)
}

// OpsReadiness is OpsWithInfo with advisory checks besides the required ones: an
// advisory failure is reported under "degraded" but leaves the instance ready. A
// service that still serves most requests without a dependency (one Redis shard of
// sixteen, say) must stay in its load balancer, or one lost shard empties the fleet.
func OpsReadiness(mux *http.ServeMux, reg *prometheus.Registry, info func() map[string]any, required, advisory map[string]Check) {
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
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
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
