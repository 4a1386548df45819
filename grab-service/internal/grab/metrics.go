package grab

import "github.com/prometheus/client_golang/prometheus"

// Metrics are grab-service's business metrics (HTTP route metrics live in httpx).
type Metrics struct {
	grabs        *prometheus.CounterVec
	grabLatency  prometheus.Histogram
	cancels      *prometheus.CounterVec
	kafkaLatency prometheus.Histogram
	kafkaErrors  *prometheus.CounterVec
	rollbacks    *prometheus.CounterVec
	shortCircuit *prometheus.CounterVec
	reconciled   *prometheus.CounterVec
	overdue      prometheus.Gauge
	redisLatency *prometheus.HistogramVec
	redisErrors  *prometheus.CounterVec
	redisBatch   prometheus.Histogram
	fallOvers    prometheus.Counter
	// Claims by how they were made, looked up once: every grab counts one.
	claimsFolded, claimsApart prometheus.Counter
	// Commits by how they reached Redis: riding a take, or in a commit.lua call.
	commitsRode, commitsApart prometheus.Counter
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns, sub = "flashsale", "grab"
	fast := []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 3}
	m := &Metrics{
		fallOvers: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "bucket_fall_overs_total", Help: "Grab attempts sent again to other buckets (a bucket sold out, or a layout learned)."}),
		grabs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "grabs_total", Help: "Grab answers by result."}, []string{"result"}),
		grabLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "grab_duration_seconds", Help: "Time to answer a grab.", Buckets: fast}),
		cancels: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "cancels_total", Help: "Cancel answers by result."}, []string{"result"}),
		kafkaLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "kafka_send_duration_seconds", Help: "Time from send to acknowledgement of a flow event.", Buckets: fast}),
		kafkaErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "kafka_send_errors_total", Help: "Flow events not acknowledged, by kind."}, []string{"kind"}),
		rollbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "rollbacks_total", Help: "Takes given back, by why."}, []string{"reason"}),
		shortCircuit: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "short_circuit_total", Help: "Grabs answered locally without Redis, by result."}, []string{"result"}),
		reconciled: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "reconciled_total", Help: "Open takes settled by the reconciler, by action."}, []string{"action"}),
		overdue: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "reconcile_overdue_seconds", Help: "How long past its settling time the oldest take the reconciler's last pass could not settle has been open (0: it settled every take due)."}),
		redisLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "redis_pipeline_duration_seconds", Help: "Pipeline round trip by shard.", Buckets: fast}, []string{"shard"}),
		redisErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "redis_errors_total", Help: "Pipelines with a failed call, by shard."}, []string{"shard"}),
		redisBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "redis_pipeline_calls", Help: "Script calls coalesced into one pipeline.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128}}),
	}
	claims := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
		Name: "claims_total", Help: "RequestId claims by how they were made: in the take's own script call (folded) or on their own (apart)."}, []string{"how"})
	m.claimsFolded, m.claimsApart = claims.WithLabelValues("folded"), claims.WithLabelValues("apart")
	commits := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
		Name: "commits_total", Help: "Commits sent to Redis by how: riding a take of the same promotions (rode) or in a commit.lua call (apart)."}, []string{"how"})
	m.commitsRode, m.commitsApart = commits.WithLabelValues("rode"), commits.WithLabelValues("apart")
	reg.MustRegister(m.grabs, m.grabLatency, m.cancels, m.kafkaLatency, m.kafkaErrors, m.rollbacks,
		m.shortCircuit, m.reconciled, m.overdue, m.redisLatency, m.redisErrors, m.redisBatch, m.fallOvers, claims, commits)
	return m
}
