package grabendpoint

import (
	"context"
	"time"

	"github.com/go-kit/kit/endpoint"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/grab-service/internal/grab"
)

// Admission bounds the grabs and cancels one instance works on at once: the
// seed's request queue. Past MaxInFlight a request waits up to QueueWait for a
// slot and is then answered UNAVAILABLE at once, nothing taken, with Retry-After.
// Without it, a slow shard or broker turns a surge into thousands of goroutines
// each holding its answer until the answer timeout, every buyer waiting behind
// all the others; with it the surge beyond capacity is told to retry in
// microseconds and the rest are answered at the speed the backends allow.
type Admission struct {
	slots    chan struct{}
	wait     time.Duration
	inFlight prometheus.Gauge
	shed     *prometheus.CounterVec
}

// NewAdmission returns the bound, or nil (no bound) when maxInFlight < 1.
func NewAdmission(maxInFlight int, queueWait time.Duration, reg prometheus.Registerer) *Admission {
	if maxInFlight < 1 {
		return nil
	}
	const ns, sub = "flashsale", "grab"
	a := &Admission{slots: make(chan struct{}, maxInFlight), wait: queueWait,
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "in_flight", Help: "Grabs and cancels being worked on by this instance."}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "shed_total", Help: "Requests answered UNAVAILABLE because the instance was at its in-flight bound, by method."}, []string{"method"}),
	}
	reg.MustRegister(a.inFlight, a.shed)
	return a
}

func (a *Admission) middleware(method string, requestID func(any) string) endpoint.Middleware {
	return func(next endpoint.Endpoint) endpoint.Endpoint {
		if a == nil {
			return next
		}
		return func(ctx context.Context, req any) (any, error) {
			if !a.acquire(ctx) {
				a.shed.WithLabelValues(method).Inc()
				return grab.Result{RequestID: requestID(req), Result: grab.Unavailable, Decision: grab.NothingTaken,
					Message: "this instance is at its bound of requests in flight; nothing was taken, retry", RetryAfter: time.Second}, nil
			}
			a.inFlight.Inc()
			defer func() {
				a.inFlight.Dec()
				<-a.slots
			}()
			return next(ctx, req)
		}
	}
}

// acquire takes a slot, waiting up to the queue wait (and no longer than ctx).
func (a *Admission) acquire(ctx context.Context) bool {
	select {
	case a.slots <- struct{}{}:
		return true
	default:
	}
	if a.wait <= 0 {
		return false
	}
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
