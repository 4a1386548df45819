package httpx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// SlowRequest is how long a request may take before the access log records it.
const SlowRequest = time.Second

// scope is everything a service keeps for one request, in one allocation under one
// context: its id, its deadline, the actor its token named, and its status for the
// access log and the route's metrics. It replaced a context, and a copy of the
// request, per middleware: those copies were a quarter of the CPU the middleware
// cost each request (BenchmarkServerChain).
type scope struct {
	context.Context // the request's own: its values, and its cancellation once armed
	id              string
	idHeader        [1]string // the X-Request-Id header's value slice, in the scope's allocation
	actor           Actor     // Require's; the zero Actor (no role) outside a guarded route
	w               statusWriter

	deadline time.Time // zero: none of the scope's own
	once     sync.Once
	armed    atomic.Pointer[armedCtx]
}

type scopeKey struct{}

func scopeOf(ctx context.Context) *scope {
	s, _ := ctx.Value(scopeKey{}).(*scope)
	return s
}

// RequestID returns the id the request's scope holds.
func RequestID(ctx context.Context) string {
	if s := scopeOf(ctx); s != nil {
		return s.id
	}
	return ""
}

// Serve gives every request a scope: an id (a sane X-Request-Id echoed, or one
// made), a deadline from its start (past WriteTimeout no answer can be written, so
// work still waiting only holds a connection), and an access log line for every
// 5xx and every request slower than SlowRequest.
func Serve(log *slog.Logger, limit time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s := newScope(w, r)
		if limit > 0 {
			s.deadline = start.Add(limit)
		}
		defer s.release()
		next.ServeHTTP(&s.w, r.WithContext(s))
		took := time.Since(start)
		if log != nil && (s.w.status >= 500 || took >= SlowRequest) {
			log.LogAttrs(r.Context(), slog.LevelWarn, "request",
				slog.String("requestId", s.id), slog.String("method", r.Method),
				slog.String("path", r.URL.Path), slog.Int("status", s.w.status), slog.Duration("took", took))
		}
	})
}

func newScope(w http.ResponseWriter, r *http.Request) *scope {
	id := r.Header.Get("X-Request-Id")
	if len(id) == 0 || len(id) > 128 || !printable(id) {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	s := &scope{Context: r.Context(), id: id, idHeader: [1]string{id}}
	// Header().Set would allocate the one-value slice; the scope holds it instead.
	// The key is already canonical, as Set would make it.
	w.Header()["X-Request-Id"] = s.idHeader[:]
	s.w = statusWriter{ResponseWriter: w, status: http.StatusOK}
	return s
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// armedCtx arms the deadline only when something waits on it (Done, Err, or a
// derived context): answers from memory alone never do, and a timer per request
// was 5% of grab-service's CPU on them. A context armed after
// the handler returns ends with the request's own.
type armedCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func (s *scope) arm() context.Context {
	if a := s.armed.Load(); a != nil {
		return a.ctx
	}
	if s.deadline.IsZero() {
		return s.Context
	}
	s.armAt(s.deadline)
	return s.armed.Load().ctx
}

// armAt arms the scope's deadline at d unless it is armed already, at whatever
// deadline; it reports whether this call armed it.
func (s *scope) armAt(d time.Time) (armed bool) {
	s.once.Do(func() {
		ctx, cancel := context.WithDeadline(s.Context, d)
		s.armed.Store(&armedCtx{ctx, cancel})
		armed = true
	})
	return armed
}

// WithDeadline is context.WithDeadline for a handler that bounds its own work (a
// grab's answer timeout): under a request's scope not armed yet it arms the
// scope's one deadline at the earlier of the two instead of a second context and
// timer beneath it (the grab's own was 3% of grab-service's CPU in the hot phase).
// The cancel is then a no-op: the scope's deadline ends when the handler returns.
func WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
	s := scopeOf(ctx)
	if s == nil {
		return context.WithDeadline(ctx, d)
	}
	if !s.deadline.IsZero() && s.deadline.Before(d) {
		d = s.deadline
	}
	if !s.armAt(d) {
		return context.WithDeadline(ctx, d)
	}
	return ctx, func() {}
}

// release stops the timer, if one was armed, when the handler returns.
func (s *scope) release() {
	if a := s.armed.Load(); a != nil {
		a.cancel()
	}
}

func (s *scope) Deadline() (time.Time, bool) {
	if a := s.armed.Load(); a != nil { // armed at its own deadline, or earlier (WithDeadline)
		return a.ctx.Deadline()
	}
	if d, ok := s.Context.Deadline(); ok && (s.deadline.IsZero() || d.Before(s.deadline)) {
		return d, true
	}
	return s.deadline, !s.deadline.IsZero()
}

func (s *scope) Done() <-chan struct{} { return s.arm().Done() }

func (s *scope) Err() error { return s.arm().Err() }

// Value answers for the scope itself, then asks the armed context once there is
// one: a context derived from this one then finds the armed deadline's cancelCtx
// under the context package's own key and registers with it directly (no
// goroutine per child), and context.Cause names the deadline.
func (s *scope) Value(key any) any {
	if _, ok := key.(scopeKey); ok {
		return s
	}
	if a := s.armed.Load(); a != nil {
		return a.ctx.Value(key)
	}
	return s.Context.Value(key)
}

// statusWriter remembers the status a handler answered, for the access log and
// the route's metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
