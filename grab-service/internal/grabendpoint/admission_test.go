package grabendpoint

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flashsale/platform/grab-service/internal/grab"
)

// The endpoint under the bound is the test's own: a grab that holds its slot until
// the test lets it go, which no real backend can be made to do on cue. The HTTP
// mapping of UNAVAILABLE (503, Retry-After) is grabtransport's, tested there.

// held is an endpoint whose calls block until release is closed, counting them.
type held struct {
	mu      sync.Mutex
	calls   int
	release chan struct{}
	entered chan struct{}
}

func newHeld() *held { return &held{release: make(chan struct{}), entered: make(chan struct{}, 100)} }

func (h *held) endpoint(ctx context.Context, req any) (any, error) {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	h.entered <- struct{}{}
	<-h.release
	return grab.Result{RequestID: req.(string), Result: grab.Granted}, nil
}

func outcome(t *testing.T, v any, err error) grab.Result {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return v.(grab.Result)
}

func TestAdmissionShedsPastTheBound(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := NewAdmission(2, 30*time.Millisecond, reg)
	h := newHeld()
	ep := a.middleware("grab", func(req any) string { return req.(string) })(h.endpoint)

	var wg sync.WaitGroup
	answers := make([]grab.Result, 2)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _ := ep(context.Background(), "in")
			answers[i] = v.(grab.Result)
		}()
	}
	<-h.entered
	<-h.entered // both slots taken

	start := time.Now()
	v, err := ep(context.Background(), "over")
	r := outcome(t, v, err)
	if r.Result != grab.Unavailable || r.RequestID != "over" || r.RetryAfter <= 0 {
		t.Fatalf("past the bound: %+v, want UNAVAILABLE with Retry-After", r)
	}
	if waited := time.Since(start); waited < 30*time.Millisecond {
		t.Fatalf("shed after %s, before the queue wait", waited)
	}
	if n := testutil.ToFloat64(a.shed.WithLabelValues("grab")); n != 1 {
		t.Fatalf("shed_total %v, want 1", n)
	}
	if n := testutil.ToFloat64(a.inFlight); n != 2 {
		t.Fatalf("in_flight %v, want 2", n)
	}

	// A request waiting in the queue gets the first slot freed. It may wait as long
	// as it takes: a slow machine must not turn the release below into a shed.
	a.wait = time.Minute
	queued := make(chan grab.Result, 1)
	go func() {
		v, _ := ep(context.Background(), "queued")
		queued <- v.(grab.Result)
	}()
	time.Sleep(5 * time.Millisecond)
	close(h.release)
	wg.Wait()
	if r := <-queued; r.Result != grab.Granted {
		t.Fatalf("queued request: %+v, want it served once a slot freed", r)
	}
	for _, r := range answers {
		if r.Result != grab.Granted {
			t.Fatalf("admitted request: %+v", r)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls != 3 || testutil.ToFloat64(a.inFlight) != 0 {
		t.Fatalf("%d calls reached the endpoint, in_flight %v; want 3 and 0", h.calls, testutil.ToFloat64(a.inFlight))
	}
}

func TestAdmissionStopsWaitingWithTheRequest(t *testing.T) {
	a := NewAdmission(1, time.Minute, prometheus.NewRegistry())
	h := newHeld()
	defer close(h.release)
	ep := a.middleware("cancel", func(req any) string { return req.(string) })(h.endpoint)
	go func() { _, _ = ep(context.Background(), "in") }()
	<-h.entered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	v, err := ep(ctx, "gone")
	r := outcome(t, v, err)
	if r.Result != grab.Unavailable || time.Since(start) > 10*time.Second {
		t.Fatalf("a request whose caller left: %+v after %s", r, time.Since(start))
	}
}

func TestNoAdmissionBound(t *testing.T) {
	if a := NewAdmission(0, time.Second, prometheus.NewRegistry()); a != nil {
		t.Fatal("a bound of 0 should mean none")
	}
	var a *Admission
	called := false
	ep := a.middleware("grab", func(any) string { return "" })(func(context.Context, any) (any, error) {
		called = true
		return grab.Result{}, nil
	})
	_, _ = ep(context.Background(), "x")
	if !called {
		t.Fatal("without a bound the endpoint must be called")
	}
}
