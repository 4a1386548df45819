package validate

import (
	"regexp"
	"strings"
	"testing"
)

var metricName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// The services' metric names follow Prometheus' conventions: snake case under the
// flashsale_ namespace, counters end in _total and nothing else does, and a time is
// measured in seconds and says so.
func TestMetricNamesFollowConventions(t *testing.T) {
	for name, m := range scanMetrics(t) {
		var errs Errs
		if !metricName.MatchString(name) || !strings.HasPrefix(name, "flashsale_") {
			errs.Addf("want snake case under the flashsale_ namespace")
		}
		if (m.Type == "counter") != strings.HasSuffix(name, "_total") {
			errs.Addf("a %s; only counters end in _total, and every counter does", m.Type)
		}
		for _, word := range []string{"duration", "latency", "_time"} {
			if strings.Contains(name, word) && !strings.HasSuffix(strings.TrimSuffix(name, "_total"), "_seconds") {
				errs.Addf("measures time: the unit (_seconds) belongs in the name")
			}
		}
		for _, l := range m.Labels {
			if !metricName.MatchString(l) {
				errs.Addf("label %q is not snake case", l)
			}
		}
		if err := errs.Err(); err != nil {
			t.Errorf("%s (%s): %v", name, m.Where, err)
		}
	}
}

// The scan must see the metrics this package's files rely on; a refactor that hides a
// definition from it (options built elsewhere) fails here rather than silently.
func TestScanFindsKnownMetrics(t *testing.T) {
	ms := scanMetrics(t)
	for _, want := range []struct{ name, typ string }{
		{"flashsale_grab_grabs_total", "counter"},
		{"flashsale_grab_grab_duration_seconds", "histogram"},
		{"flashsale_grab_http_requests_total", "counter"},
		{"flashsale_promo_admin_http_request_duration_seconds", "histogram"},
		{"flashsale_config_document_info", "gauge"},
		{"flashsale_sink_consumer_lag_messages", "gauge"},
	} {
		if m, ok := ms[want.name]; !ok || m.Type != want.typ {
			t.Errorf("%s: want a %s, found %+v", want.name, want.typ, m)
		}
	}
}
