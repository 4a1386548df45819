package validate

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
)

var (
	metricsOnce sync.Once
	metricsAll  map[string]Metric
	metricsErr  error
)

// scanMetrics scans the repository once per test binary.
func scanMetrics(t *testing.T) map[string]Metric {
	metricsOnce.Do(func() { metricsAll, metricsErr = ScanMetrics(Root()) })
	if metricsErr != nil {
		t.Fatalf("scanning the services' metrics: %v", metricsErr)
	}
	if len(metricsAll) == 0 {
		t.Fatal("no metrics found in the services' code")
	}
	return metricsAll
}

// ProvisionedDatasourceUID is the uid of the Prometheus datasource Grafana provisions.
func ProvisionedDatasourceUID(t *testing.T) string {
	var doc struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name      string         `yaml:"name"`
			UID       string         `yaml:"uid"`
			Type      string         `yaml:"type"`
			Access    string         `yaml:"access"`
			URL       string         `yaml:"url"`
			IsDefault bool           `yaml:"isDefault"`
			Editable  bool           `yaml:"editable"`
			JSONData  map[string]any `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	data, err := os.ReadFile(Path(GrafanaProvisioning, "datasources", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := StrictYAML(data, &doc); err != nil {
		t.Fatalf("grafana datasource provisioning: %v", err)
	}
	if doc.APIVersion != 1 || len(doc.Datasources) != 1 || doc.Datasources[0].Type != "prometheus" || doc.Datasources[0].UID == "" {
		t.Fatalf("grafana datasource provisioning: want apiVersion 1 and one prometheus datasource with a uid, have %+v", doc)
	}
	return doc.Datasources[0].UID
}

// tool finds an external validator: $ENV, else PATH. With FLASHSALE_VALIDATE_STRICT=1
// (validate.sh, and so `make test`) a missing tool fails the test; otherwise it skips,
// so `go test` here works on a machine without it.
func tool(t *testing.T, env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if os.Getenv("FLASHSALE_VALIDATE_STRICT") == "1" {
		t.Fatalf("%s not found (set %s or run deploy/validate/validate.sh, which installs it)", name, env)
	}
	t.Skipf("%s not found; deploy/validate/validate.sh installs it", name)
	return ""
}

// slug is GitHub's anchor for a Markdown heading.
func slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = regexp.MustCompile("[^a-z0-9 _-]").ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// runbookAnchors are the anchors of deploy/RUNBOOK.md's headings.
func runbookAnchors(t *testing.T) map[string]bool {
	data, err := os.ReadFile(Path("deploy", "RUNBOOK.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "#") {
			out[slug(strings.TrimLeft(line, "#"))] = true
		}
	}
	return out
}
