package httpx

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// SlowRequest is how long a request may take before the access log records it.
const SlowRequest = time.Second

// AccessLog records every 5xx answer and every request slower than SlowRequest,
// with its request id, so an operator can follow one request from the load
// balancer to the service's log; the bulk of healthy traffic is left to /metrics.
func AccessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		took := time.Since(start)
		if sw.status >= 500 || took >= SlowRequest {
			log.LogAttrs(r.Context(), slog.LevelWarn, "request",
				slog.String("requestId", RequestID(r.Context())), slog.String("method", r.Method),
				slog.String("path", r.URL.Path), slog.Int("status", sw.status), slog.Duration("took", took))
		}
	})
}

// ContextHandler adds the request id of the context to every record logged with
// one (the *Context logging calls), so a service's warnings name the request.
type ContextHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h ContextHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("httpRequestId", id))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h ContextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return ContextHandler{h.Handler.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h ContextHandler) WithGroup(name string) slog.Handler {
	return ContextHandler{h.Handler.WithGroup(name)}
}
