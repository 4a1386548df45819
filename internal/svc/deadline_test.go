package svc

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
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
