package httpx

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports whether one dependency needed to serve is usable.
type Check func(ctx context.Context) error

// Ops mounts /healthz, /readyz and /metrics on mux. /readyz runs every check with a
// short deadline and answers 503 naming each failing dependency.
func Ops(mux *http.ServeMux, reg *prometheus.Registry, checks map[string]Check) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		failing := map[string]string{}
		for name, check := range checks {
			if err := check(ctx); err != nil {
				failing[name] = err.Error()
			}
		}
		if len(failing) > 0 {
			names := make([]string, 0, len(failing))
			for n := range failing {
				names = append(names, n)
			}
			sort.Strings(names)
			WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "failing": names, "errors": failing})
			return
		}
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
}
