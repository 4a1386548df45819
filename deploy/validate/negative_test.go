package validate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// The validators refuse what they exist to refuse; a check that passes everything
// would make the rest of this package decoration.

func TestComposeSchemaRefusesUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	bad := "services:\n  a:\n    image: redis:7.2.5-alpine\n    restart_policy: always\n"
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir: dir, ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "compose.yaml")}},
	}, func(o *loader.Options) { o.SetProjectName("x", true) })
	if err == nil || !strings.Contains(err.Error(), "restart_policy") {
		t.Errorf("compose schema accepted an unknown key: %v", err)
	}
}

func TestKubernetesStrictDecodingRefusesUnknownFields(t *testing.T) {
	for name, doc := range map[string]string{
		"misspelt field": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replica: 2}\n",
		"wrong type":     "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: two}\n",
		"bad quantity":   "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {template: {spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}}}\n",
	} {
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(doc), &d); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestQueriesRefuseWhatPrometheusWouldNotShow(t *testing.T) {
	q := NewQueries(map[string]Metric{
		"flashsale_x_total":            {Name: "flashsale_x_total", Type: "counter", Labels: []string{"result"}},
		"flashsale_x_duration_seconds": {Name: "flashsale_x_duration_seconds", Type: "histogram"},
		"flashsale_x_lag_messages":     {Name: "flashsale_x_lag_messages", Type: "gauge"},
	})
	for _, ok := range []string{
		`sum by (result) (rate(flashsale_x_total{result="GRANTED", job="grab-service"}[5m]))`,
		`histogram_quantile(0.99, sum by (le) (rate(flashsale_x_duration_seconds_bucket[5m])))`,
		`max(flashsale_x_lag_messages) > 10 and up == 1`,
	} {
		if _, err := q.Check(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		`rate(flashsale_y_total[5m])`,                                  // no such metric
		`rate(flashsale_x_total{shard="1"}[5m])`,                       // no such label
		`flashsale_x_total > 5`,                                        // a counter read raw
		`rate(flashsale_x_lag_messages[5m])`,                           // rate of a gauge
		`sum(rate(flashsale_x_total[5m])`,                              // does not parse
		`{__name__=~"flashsale_.*"}`,                                   // names no metric
		`histogram_quantile(0.9, flashsale_x_duration_seconds_bucket)`, // buckets read raw
	} {
		if _, err := q.Check(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
