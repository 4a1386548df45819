package validate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// External are the series queries may use that the services do not define, with the
// labels they carry and where they come from.
var External = map[string]struct {
	Labels []string
	Source string
}{
	"up":                     {nil, "Prometheus, for every target"},
	"kube_job_status_failed": {[]string{"namespace", "job_name"}, "kube-state-metrics (cluster add-on)"},
	"kube_cronjob_status_last_successful_time": {[]string{"namespace", "cronjob"}, "kube-state-metrics (cluster add-on)"},
	"redis_memory_used_bytes":                  {nil, "redis_exporter (job redis)"},
	"redis_memory_max_bytes":                   {nil, "redis_exporter (job redis)"},
	"redis_master_link_up":                     {nil, "redis_exporter (job redis), on replicas"},
	"redis_connected_clients":                  {nil, "redis_exporter (job redis)"},
	"kafka_consumergroup_lag":                  {[]string{"consumergroup", "topic", "partition"}, "kafka_exporter (job kafka)"},
	"mysql_up":                                 {nil, "mysqld_exporter (job mysql)"},
}

// TargetLabels are the labels Prometheus adds to every scraped series
// (deploy/observability/prometheus/*.yml).
var TargetLabels = []string{"job", "instance"}

// Queries checks PromQL expressions against the metrics the services define.
type Queries struct {
	series map[string]seriesInfo
	parser parser.Parser
}

type seriesInfo struct {
	family  Metric
	labels  []string
	counter bool // a value that only goes up: take rate/irate/increase of it
	known   bool
}

// NewQueries indexes every series name the metrics expose.
func NewQueries(metrics map[string]Metric) *Queries {
	q := &Queries{series: map[string]seriesInfo{}, parser: parser.NewParser(parser.Options{})}
	for _, m := range metrics {
		for _, s := range m.Series() {
			info := seriesInfo{family: m, labels: append(slices.Clone(m.Labels), TargetLabels...), known: true}
			switch {
			case m.Type == "counter":
				info.counter = true
			case strings.HasSuffix(s, "_bucket"):
				info.counter = true
				info.labels = append(info.labels, "le")
			case s != m.Name: // _sum, _count
				info.counter = true
			}
			q.series[s] = info
		}
	}
	for name, ext := range External {
		q.series[name] = seriesInfo{family: Metric{Name: name, Type: "external"}, labels: append(slices.Clone(ext.Labels), TargetLabels...), known: true}
	}
	return q
}

// Parse parses expr with the PromQL parser.
func (q *Queries) Parse(expr string) (parser.Expr, error) {
	return q.parser.ParseExpr(expr)
}

// Check parses expr and checks every series it selects: the name is defined (by the
// services or in External), each label matched is one the series has, and counters
// are only read through rate, irate or increase. It returns the series names used.
func (q *Queries) Check(expr string) ([]string, error) {
	ast, err := q.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var errs Errs
	var used []string
	parser.Inspect(ast, func(node parser.Node, path []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			errs.Addf("selector %s names no metric", vs)
			return nil
		}
		used = append(used, name)
		info, ok := q.series[name]
		if !ok {
			errs.Addf("%s: no such metric in the services' code (nor in External)", name)
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel {
				continue
			}
			if !slices.Contains(info.labels, m.Name) {
				errs.Addf("%s has no label %q (it has %v)", name, m.Name, info.labels)
			}
		}
		fn := rangeFunc(path)
		switch {
		case info.counter && fn == "":
			errs.Addf("%s is a counter: read it through rate, irate or increase", name)
		case !info.counter && (fn == "rate" || fn == "irate" || fn == "increase"):
			errs.Addf("%s is a %s: %s of it means nothing", name, info.family.Type, fn)
		}
		return nil
	})
	return used, errs.Err()
}

// rangeFunc names the function applied to the range vector whose selector ends path.
func rangeFunc(path []parser.Node) string {
	if len(path) < 2 {
		return ""
	}
	if _, ok := path[len(path)-1].(*parser.MatrixSelector); !ok {
		return ""
	}
	for i := len(path) - 2; i >= 0; i-- {
		switch n := path[i].(type) {
		case *parser.Call:
			return n.Func.Name
		case parser.Expressions, *parser.ParenExpr:
			continue
		default:
			return ""
		}
	}
	return ""
}
