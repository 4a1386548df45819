package validate

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
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

func TestInvocationCheckRefusesBadCommands(t *testing.T) {
	good := Invocation{Where: "test", Binary: "grab-service", Env: map[string]bool{"FLASHSALE_CHECKOUT_TOKEN": true, MySQLEnv: true,
		RedisUserEnv: true, RedisPasswordEnv: true, KafkaMechanismEnv: true, KafkaUserEnv: true, KafkaPasswordEnv: true, NacosPasswordEnv: true},
		Args: []string{"--listen", ":8080", "--redis", strings.Join(composeWant.Redis, ","),
			"--kafka", strings.Join(composeWant.Kafka, ","), "--nacos", "nacos:8848", "--nacos-username", "flashsale", "--ops-listen", ":9180"}}
	var errs Errs
	CheckInvocation(good, composeWant, &errs, func(s string) { t.Log(s) })
	if len(errs) > 0 {
		t.Fatalf("a good invocation refused: %v", errs.Err())
	}
	for name, edit := range map[string]func(inv *Invocation){
		"15 shards": func(inv *Invocation) { inv.Args[3] = strings.Join(composeWant.Redis[1:], ",") },
		"shards reordered": func(inv *Invocation) {
			r := slices.Clone(composeWant.Redis)
			r[0], r[1] = r[1], r[0]
			inv.Args[3] = strings.Join(r, ",")
		},
		"one broker": func(inv *Invocation) { inv.Args[5] = composeWant.Kafka[0] },
		"no token":   func(inv *Invocation) { inv.Env = map[string]bool{MySQLEnv: true} },
		"no DSN":     func(inv *Invocation) { inv.Env = map[string]bool{"FLASHSALE_CHECKOUT_TOKEN": true} },
		"DSN in argv": func(inv *Invocation) {
			inv.Args = append(inv.Args, "--mysql", "u:p@tcp(mysql:3306)/flashsale?parseTime=true")
		},
		"local mode":                   func(inv *Invocation) { inv.Args = append(inv.Args, "--local") },
		"no ops listener":              func(inv *Invocation) { inv.Args = inv.Args[:len(inv.Args)-2] },
		"ops listener on loopback":     func(inv *Invocation) { inv.Args[len(inv.Args)-1] = "127.0.0.1:9180" },
		"ops listener on the API port": func(inv *Invocation) { inv.Args[len(inv.Args)-1] = ":8080" },
		"no Kafka SASL": func(inv *Invocation) {
			inv.Env = maps.Clone(inv.Env)
			delete(inv.Env, KafkaMechanismEnv)
		},
		"no Kafka password": func(inv *Invocation) {
			inv.Env = maps.Clone(inv.Env)
			delete(inv.Env, KafkaPasswordEnv)
		},
		"no Nacos user": func(inv *Invocation) { inv.Args = slices.Delete(inv.Args, 8, 10) },
		"no Nacos password": func(inv *Invocation) {
			inv.Env = maps.Clone(inv.Env)
			delete(inv.Env, NacosPasswordEnv)
		},
		"unknown flag": func(inv *Invocation) { inv.Args = append(inv.Args, "--bogus", "1") },
	} {
		if _, err := os.Stat(Path("bin", "grab-service")); err != nil && name == "unknown flag" {
			continue // flags are checked against the built binary only
		}
		inv := good
		inv.Args = slices.Clone(good.Args)
		edit(&inv)
		var errs Errs
		CheckInvocation(inv, composeWant, &errs, func(s string) { t.Log(s) })
		if len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}
