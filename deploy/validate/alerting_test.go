package validate

import (
	"slices"
	"testing"

	amconfig "github.com/prometheus/alertmanager/config"
	"github.com/prometheus/common/promslog"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	_ "github.com/prometheus/prometheus/discovery/dns" // dns_sd_configs of prometheus-k8s.yml
)

// The alerting chain holds together: both Prometheus configurations send to the
// Alertmanager the deployment runs, Alertmanager's configuration loads (its own
// parser) with every route ending at a receiver that sends somewhere, and the
// webhook URL file it reads is the secret compose mounts.
func TestAlertingChain(t *testing.T) {
	am, err := amconfig.LoadFile(Path("deploy/observability/alertmanager/alertmanager.yml"))
	if err != nil {
		t.Fatalf("alertmanager.yml: %v", err)
	}
	var urlFile string
	for _, r := range am.Receivers {
		if len(r.WebhookConfigs) == 0 && len(r.EmailConfigs) == 0 && len(r.PagerdutyConfigs) == 0 && len(r.SlackConfigs) == 0 {
			t.Errorf("receiver %s sends nowhere", r.Name)
		}
		for _, w := range r.WebhookConfigs {
			if w.URL != "" {
				t.Errorf("receiver %s: a webhook URL in the file; it holds a token, read it from url_file", r.Name)
			}
			urlFile = w.URLFile
		}
	}
	if am.Route == nil || am.Route.Receiver == "" {
		t.Fatal("alertmanager.yml: no default route")
	}

	for file, want := range map[string]string{
		"deploy/observability/prometheus/prometheus.yml":     "alertmanager:9093",
		"deploy/observability/prometheus/prometheus-k8s.yml": "alertmanager.flashsale.svc.cluster.local:9093",
	} {
		cfg, err := promconfig.LoadFile(Path(file), false, promslog.NewNopLogger())
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var targets []string
		for _, a := range cfg.AlertingConfig.AlertmanagerConfigs {
			for _, sd := range a.ServiceDiscoveryConfigs {
				static, ok := sd.(discovery.StaticConfig)
				if !ok {
					continue
				}
				for _, g := range static {
					for _, tg := range g.Targets {
						targets = append(targets, string(tg["__address__"]))
					}
				}
			}
		}
		if !slices.Contains(targets, want) {
			t.Errorf("%s: alerts go to %v, want %s", file, targets, want)
		}
	}

	p, err := loadCompose(t, composeEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	svc, ok := p.Services["alertmanager"]
	if !ok {
		t.Fatal("compose runs no alertmanager")
	}
	mounted := false
	for _, s := range svc.Secrets {
		mounted = mounted || s.Target == urlFile
	}
	if !mounted {
		t.Errorf("compose's alertmanager does not mount a secret at %s, the webhook's url_file", urlFile)
	}
}
