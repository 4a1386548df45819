package httpx

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"
)

// serveOnce runs h behind Serve with deadline d for one request whose own context
// is parent, as net/http gives each request a context of the connection's.
func serveOnce(parent context.Context, d time.Duration, h http.HandlerFunc) {
	r := httptest.NewRequest("GET", "/", nil).WithContext(parent)
	Serve(nil, d, h).ServeHTTP(httptest.NewRecorder(), r)
}

// The deadline is armed only when waited on, and then it works as
// context.WithDeadline does: Done closes at the deadline, Err and Cause say why,
// and so do the contexts derived from it.
func TestRequestDeadlineFiresWhenWaitedOn(t *testing.T) {
	t.Parallel()
	serveOnce(context.Background(), 50*time.Millisecond, func(_ http.ResponseWriter, r *http.Request) {
		child, cancel := context.WithCancel(context.WithValue(r.Context(), testKey{}, "v"))
		defer cancel()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a context derived from the request's was not cancelled by its deadline")
		}
		ctx := r.Context()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) ||
			!errors.Is(child.Err(), context.DeadlineExceeded) {
			t.Fatalf("after the deadline: Err %v, Cause %v, child's Err %v; want DeadlineExceeded", ctx.Err(), context.Cause(ctx), child.Err())
		}
	})
}

// A client that goes away cancels the request's context, armed or not yet armed.
func TestRequestDeadlineFollowsTheConnection(t *testing.T) {
	t.Parallel()
	for _, armFirst := range []bool{true, false} {
		parent, gone := context.WithCancel(context.Background())
		serveOnce(parent, time.Hour, func(_ http.ResponseWriter, r *http.Request) {
			if armFirst {
				_ = r.Context().Done()
			}
			gone()
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("armed first %v: the connection's cancellation did not reach the request", armFirst)
			}
			if !errors.Is(r.Context().Err(), context.Canceled) {
				t.Fatalf("armed first %v: Err %v, want Canceled", armFirst, r.Context().Err())
			}
		})
	}
}

// A handler that never waits on its context (a sold-out answer) arms no timer, and
// an earlier deadline of the connection's context is the one reported.
func TestRequestDeadlineUnwatchedArmsNothing(t *testing.T) {
	t.Parallel()
	parent, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var dc *scope
	serveOnce(parent, time.Hour, func(_ http.ResponseWriter, r *http.Request) {
		dc = r.Context().(*scope)
		pd, _ := parent.Deadline()
		if d, ok := r.Context().Deadline(); !ok || !d.Equal(pd) {
			t.Errorf("deadline %v %v; want the connection's earlier %v", d, ok, pd)
		}
		_ = r.Context().Value(struct{}{})
	})
	if dc.armed.Load() != nil {
		t.Fatal("a request that never waited on its context armed a timer")
	}
}

// Contexts derived from the request's register with its armed deadline directly,
// as with any cancelCtx, rather than each starting a goroutine to watch it. Not
// parallel: it counts the process's goroutines.
func TestRequestDeadlineChildrenNeedNoGoroutine(t *testing.T) {
	const children = 200
	serveOnce(context.Background(), time.Hour, func(_ http.ResponseWriter, r *http.Request) {
		before := runtime.NumGoroutine()
		var cancels []context.CancelFunc
		for range children {
			_, cancel := context.WithCancel(r.Context())
			cancels = append(cancels, cancel)
		}
		if added := runtime.NumGoroutine() - before; added >= children/2 {
			t.Errorf("%d derived contexts started %d goroutines", children, added)
		}
		for _, c := range cancels {
			c()
		}
	})
}

// BenchmarkRequestDeadline compares the lazily armed deadline with a timer armed
// for every request (context.WithTimeout, what the deadline middleware did before), on a
// handler that never waits on its context, as a sold-out answer does, under a
// cancellable parent as net/http gives: go test -bench RequestDeadline ./internal/httpx
func BenchmarkRequestDeadline(b *testing.B) {
	nothing := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	eager := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		nothing.ServeHTTP(w, r.WithContext(ctx))
	})
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"lazy", Serve(nil, 10*time.Second, nothing)}, {"timer", Serve(nil, 0, eager)}} {
		b.Run(c.name, func(b *testing.B) {
			conn, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := httptest.NewRequest("POST", "/v1/grab", nil).WithContext(conn)
			b.ReportAllocs()
			for b.Loop() {
				c.h.ServeHTTP(discard{}, r)
			}
		})
	}
}

// A handler's own deadline under a request's scope arms the scope's one timer at
// the earlier deadline rather than a second context beneath it; once the scope is
// armed, or outside a scope, it is context.WithDeadline's.
func TestWithDeadlineArmsTheScopeOnce(t *testing.T) {
	t.Parallel()
	check := func(name string, ctx context.Context, same bool, got context.Context, want time.Time) {
		t.Helper()
		if (got == ctx) != same {
			t.Errorf("%s: the same context %v, want %v", name, got == ctx, same)
		}
		if d, ok := got.Deadline(); !ok || !d.Equal(want) {
			t.Errorf("%s: deadline %v %v, want %v", name, d, ok, want)
		}
	}
	var start time.Time
	h := Serve(nil, 10*time.Second, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		soon := time.Now().Add(50 * time.Millisecond)
		got, cancel := WithDeadline(ctx, soon)
		defer cancel()
		check("first, earlier than the scope's", ctx, true, got, soon)
		later, cancelLater := WithDeadline(ctx, soon.Add(time.Second))
		defer cancelLater()
		check("second, once armed", ctx, false, later, soon)
		<-got.Done()
		if !errors.Is(got.Err(), context.DeadlineExceeded) || time.Since(start) < 50*time.Millisecond {
			t.Errorf("the armed deadline ended with %v after %s", got.Err(), time.Since(start))
		}
	}))
	start = time.Now()
	h.ServeHTTP(discard{}, httptest.NewRequest("POST", "/v1/grab", nil))

	h = Serve(nil, 40*time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		want, _ := ctx.Deadline()
		got, cancel := WithDeadline(ctx, time.Now().Add(time.Hour))
		defer cancel()
		check("later than the scope's", ctx, true, got, want)
	}))
	h.ServeHTTP(discard{}, httptest.NewRequest("POST", "/v1/grab", nil))

	bare := context.Background()
	d := time.Now().Add(time.Minute)
	got, cancel := WithDeadline(bare, d)
	defer cancel()
	check("outside a scope", bare, false, got, d)
}

// BenchmarkGrabDeadline is a grab's own answer deadline under the request's scope,
// waited on as a grab waits on it: the scope's timer armed at the earlier deadline
// (WithDeadline) against a second context beneath it (context.WithDeadline):
// go test -bench GrabDeadline -benchmem ./internal/httpx
func BenchmarkGrabDeadline(b *testing.B) {
	for _, c := range []struct {
		name string
		with func(context.Context, time.Time) (context.Context, context.CancelFunc)
	}{{"scope", WithDeadline}, {"context", context.WithDeadline}} {
		b.Run(c.name, func(b *testing.B) {
			h := Serve(nil, 10*time.Second, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx, cancel := c.with(r.Context(), time.Now().Add(3*time.Second))
				_ = ctx.Done()
				cancel()
			}))
			conn, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := httptest.NewRequest("POST", "/v1/grab", nil).WithContext(conn)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(discard{}, r)
			}
		})
	}
}

// testKey is the key of the test's context value.
type testKey struct{}

// discard is a ResponseWriter that keeps nothing but its header.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(int)             {}
