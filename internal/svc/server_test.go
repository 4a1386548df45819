package svc

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/internal/httpx"
)

// A handler waiting on a dependency that never answers (a frozen MySQL) must be
// released by its request's deadline rather than hold its goroutine forever: every
// request context carries one, no later than the server's WriteTimeout.
func TestServerBoundsEveryRequestContext(t *testing.T) {
	t.Parallel()
	var left time.Duration
	var ok bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d time.Time
		d, ok = r.Context().Deadline()
		left = time.Until(d)
	})
	srv := Server("127.0.0.1:0", h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv.Handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if !ok || left <= 0 || left > srv.WriteTimeout {
		t.Fatalf("request context deadline: set %v, %s left; want at most the WriteTimeout %s", ok, left, srv.WriteTimeout)
	}
}

// BenchmarkServerChain is what every request pays before and after its handler:
// the server's middleware (request id, access log, deadline), the route's metrics
// and its token check, around a handler that writes a fixed answer, as the bare
// handler of make bench does: go test -bench ServerChain -benchmem ./internal/svc
func BenchmarkServerChain(b *testing.B) {
	tokens := httpx.Tokens{{Token: "bench-token-0123456789abcdef", Role: httpx.RoleCheckout, Name: "bench"}}
	answer := []byte(`{"result":"SOLD_OUT"}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/grab", httpx.NewRouteMetrics(prometheus.NewRegistry(), "bench").Wrap("grab", tokens.Require(h, httpx.RoleCheckout)))
	srv := Server("127.0.0.1:0", mux, slog.New(slog.NewTextHandler(io.Discard, nil)))
	req := httptest.NewRequest("POST", "/v1/grab", nil)
	req.Header.Set("Authorization", "Bearer bench-token-0123456789abcdef")
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		srv.Handler.ServeHTTP(w, req)
		if w.status != 0 && w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}

// discardWriter is a ResponseWriter that keeps nothing, so the benchmark counts
// the chain's allocations and not a recorder's.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }

// An on-call engineer's profile of pprof's default 30 s must be served by the ops
// listener: the public listener's 10 s deadline cut any of 10 s or more short (its
// answer came back empty). A profile shorter than its server's deadline is served
// whole and a longer one is not, shown on a server of a 2 s deadline; OpsServer's
// deadline must leave room for the default.
func TestOpsServerServesAThirtySecondProfile(t *testing.T) {
	t.Parallel()
	if srv := OpsServer("127.0.0.1:0", http.NotFoundHandler(), slog.New(slog.NewTextHandler(io.Discard, nil))); srv.WriteTimeout <= 31*time.Second {
		t.Fatalf("ops listener WriteTimeout %s: a 30 s profile cannot be written", srv.WriteTimeout)
	}
	srv := server("127.0.0.1:0", httpx.OpsHandler(prometheus.NewRegistry(), nil, true), slog.New(slog.NewTextHandler(io.Discard, nil)), 2*time.Second)
	ts := httptest.NewUnstartedServer(srv.Handler)
	ts.Config = srv
	ts.Start()
	defer ts.Close()
	for _, c := range []struct {
		seconds int
		whole   bool
	}{{1, true}, {3, false}} {
		resp, err := http.Get(ts.URL + "/debug/pprof/profile?seconds=" + strconv.Itoa(c.seconds))
		var body []byte
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		served := err == nil && resp.StatusCode == http.StatusOK && len(body) > 0
		if served != c.whole {
			t.Fatalf("a %d s profile on a server of a 2 s deadline: served %v (%v, %d bytes); want %v", c.seconds, served, err, len(body), c.whole)
		}
	}
}
