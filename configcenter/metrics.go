package configcenter

import "github.com/prometheus/client_golang/prometheus"

// Metrics show which switches document is in force and how many were rejected.
type Metrics struct {
	rejected   prometheus.Counter
	info       *prometheus.GaugeVec
	flags      *prometheus.GaugeVec
	factor     prometheus.Gauge
	degradeCap prometheus.Gauge
	appliedAt  prometheus.Gauge
}

// NewMetrics registers the config metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flashsale", Subsystem: "config",
			Name: "rejected_documents_total", Help: "Switches documents rejected as malformed."}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "flashsale", Subsystem: "config",
			Name: "document_info", Help: "1 for the md5 of the switches document in force."}, []string{"md5"}),
		flags: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "flashsale", Subsystem: "config",
			Name: "switch", Help: "Boolean switches in force (1 = on)."}, []string{"name"}),
		factor: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "flashsale", Subsystem: "config",
			Name: "degrade_rate_factor", Help: "degradeRateFactor of the document in force."}),
		degradeCap: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "flashsale", Subsystem: "config",
			Name: "degrade_max_per_second", Help: "degradeMaxPerSecond of the document in force: grabs a second one instance sends to MySQL while degraded."}),
		appliedAt: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "flashsale", Subsystem: "config",
			Name: "applied_timestamp_seconds", Help: "When the document in force was applied by this instance."}),
	}
	reg.MustRegister(m.rejected, m.info, m.flags, m.factor, m.degradeCap, m.appliedAt)
	return m
}

func (m *Metrics) applied(s *Snapshot) {
	m.info.Reset()
	m.info.WithLabelValues(s.MD5).Set(1)
	m.flags.WithLabelValues("grabEnabled").Set(b2f(s.GrabEnabled))
	m.flags.WithLabelValues("kafkaDegrade").Set(b2f(s.KafkaDegrade))
	m.factor.Set(s.DegradeRateFactor)
	m.degradeCap.Set(s.DegradeMaxPerSecond)
	m.appliedAt.Set(float64(s.AppliedAt.UnixNano()) / 1e9)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
