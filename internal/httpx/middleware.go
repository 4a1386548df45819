package httpx

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RouteMetrics counts requests by route and status code and times them.
type RouteMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewRouteMetrics registers the route metrics of service on reg.
func NewRouteMetrics(reg prometheus.Registerer, service string) *RouteMetrics {
	m := &RouteMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flashsale", Subsystem: service, Name: "http_requests_total",
			Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "flashsale", Subsystem: service, Name: "http_request_duration_seconds",
			Help:    "HTTP request latency by route.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 3},
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// Wrap instruments next under the route label. The latency series is bound once,
// and a counter once per status code the route answers: a label lookup hashes its
// values and takes the vector's lock, on every request.
func (m *RouteMetrics) Wrap(route string, next http.Handler) http.Handler {
	latency := m.latency.WithLabelValues(route)
	var byCode [600]atomic.Pointer[prometheus.Counter] // by status code; net/http writes 100-599
	count := func(code int) {
		if code < 0 || code >= len(byCode) {
			m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
			return
		}
		c := byCode[code].Load()
		if c == nil {
			bound := m.requests.WithLabelValues(route, strconv.Itoa(code))
			c = &bound
			byCode[code].Store(c)
		}
		(*c).Inc()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw, ok := w.(*statusWriter) // the scope's (Serve), else one of its own
		if !ok {
			sw = &statusWriter{ResponseWriter: w, status: http.StatusOK}
		}
		next.ServeHTTP(sw, r)
		count(sw.status)
		latency.Observe(time.Since(start).Seconds())
	})
}
