package flowsink

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the flow sink's; names carry units and counters end in _total.
type Metrics struct {
	Lag          prometheus.Gauge
	Consumed     prometheus.Counter
	RowsWritten  prometheus.Counter
	DeadLetters  prometheus.Counter
	BatchLatency prometheus.Histogram
	BatchSize    prometheus.Histogram
	Retries      *prometheus.CounterVec
	// LostEvents is, by partition, how many events Kafka deleted before the sink
	// stored them (its offset past retention); above 0 the sink has stopped there.
	LostEvents *prometheus.GaugeVec
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns, sub = "flashsale", "sink"
	m := &Metrics{
		Lag: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "consumer_lag_messages", Help: "Flow events Kafka holds that the sink's group has not committed, over all partitions."}),
		Consumed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "messages_consumed_total", Help: "Flow messages stored (or dead-lettered) and committed."}),
		RowsWritten: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "rows_written_total", Help: "grab_flow rows inserted (redelivered duplicates excluded)."}),
		DeadLetters: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "dead_letters_total", Help: "Undecodable flow messages sent to the dead-letter topic."}),
		BatchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "batch_duration_seconds", Help: "From a batch's first fetched message to its offsets committed.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
		BatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "batch_messages", Help: "Messages per batch.", Buckets: []float64{1, 5, 10, 50, 100, 250, 500, 1000}}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "retries_total", Help: "Failed attempts retried, by step (mysql, dead_letter, commit, fetch)."}, []string{"step"}),
		LostEvents: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "lost_events", Help: "Events Kafka deleted before the sink stored them, by partition (retention passed); above 0 the sink has stopped consuming that partition unless --skip-lost."}, []string{"partition"}),
	}
	reg.MustRegister(m.Lag, m.Consumed, m.RowsWritten, m.DeadLetters, m.BatchLatency, m.BatchSize, m.Retries, m.LostEvents)
	return m
}
