package validate

// Files of the Prometheus setup.
const (
	PromDir          = "deploy/observability/prometheus"
	AlertRules       = PromDir + "/rules/alerts.yml"
	AlertTests       = PromDir + "/tests/alerts_test.yml"
	PromConfig       = PromDir + "/prometheus.yml"
	PromConfigK8s    = PromDir + "/prometheus-k8s.yml"
	runbookURLPrefix = "deploy/RUNBOOK.md#"
)

// RuleFile is the layout of a Prometheus rule file, strictly.
type RuleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []Rule `yaml:"rules"`
	} `yaml:"groups"`
}

// Rule is one alerting or recording rule.
type Rule struct {
	Alert         string            `yaml:"alert"`
	Record        string            `yaml:"record"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for"`
	KeepFiringFor string            `yaml:"keep_firing_for"`
	Labels        map[string]string `yaml:"labels"`
	Annotations   map[string]string `yaml:"annotations"`
}

// RuleTests is the part of a promtool test file this package reads.
type RuleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			AlertName string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// ScrapeJobs is the part of a Prometheus config this package reads.
type ScrapeJobs struct {
	ScrapeConfigs []struct {
		JobName string `yaml:"job_name"`
	} `yaml:"scrape_configs"`
}
