package validate

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
			"--kafka", strings.Join(composeWant.Kafka, ","), "--nacos", "nacos:8848", "--nacos-username", "flashsale",
			"--redis-sentinels", strings.Join(composeWant.Sentinels, ","), "--redis-allow", "redis-master-*,redis-replica-*", "--max-conns", "10000",
			"--ops-listen", ":9180"}}
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
		"unknown flag":               func(inv *Invocation) { inv.Args = append(inv.Args, "--bogus", "1") },
		"no sentinels":               func(inv *Invocation) { inv.Args = slices.Delete(inv.Args, 10, 12) },
		"one sentinel":               func(inv *Invocation) { inv.Args[11] = composeWant.Sentinels[0] },
		"sentinels of another stack": func(inv *Invocation) { inv.Args[11] = strings.Join(k8sWant.Sentinels, ",") },
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

func TestImageCheckRefusesMovingTags(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("0f", 32)
	for _, ok := range []string{"redis:8.10.2-alpine3.23", "prom/prometheus:v2.53.5", "apache/kafka:4.3.1",
		"registry.example.com:5000/redis:7.4.6", "redis@sha256:" + strings.Repeat("ab", 32), "redis:7.4.6" + digest} {
		if err := CheckImageRef(ok, true); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"redis", "redis:latest", "registry.example.com:5000/redis", "redis:alpine", "grafana/grafana:main", "redis@sha256:abc", "redis:7.4.6@sha256:abc", "@sha256:" + strings.Repeat("ab", 32)} {
		if err := CheckImageRef(bad, true); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	if err := CheckImageRef("flashsale/grab-service:dev", false); err != nil {
		t.Errorf("a locally built image's tag refused: %v", err)
	}
}

func TestImagePinNeedsTagAndDigest(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("0f", 32)
	for _, ok := range []string{"redis:8.10.2-alpine3.23" + digest, "registry.example.com:5000/prom/prometheus:v2.53.5" + digest, "danielqsj/kafka-exporter" + digest} {
		if err := CheckImagePinned(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"redis:8.10.2-alpine3.23", "redis" + digest, "redis:latest" + digest, "redis:8.10.2@sha256:0f0f", "danielqsj/kafka-exporter:v1.9.0", "prom/prometheus" + digest} {
		if err := CheckImagePinned(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestRedisImageCheckRefusesTheLuaCVE(t *testing.T) {
	for _, ok := range []string{"redis:7.2.11", "redis:7.4.6-alpine", "redis:7.4.11-alpine3.21", "redis:8.0.4", "redis:8.2.2-bookworm", "redis:8.4.0", "redis:8.10.2-alpine3.23@sha256:" + strings.Repeat("0f", 32)} {
		if err := CheckRedisImage(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	// 7.2.5-alpine was the image before this check; 7.0 and 6.2 are below the minimum.
	for _, bad := range []string{"redis:7.2.5-alpine", "redis:7.2.10", "redis:7.4.5", "redis:8.0.3", "redis:8.2.1-alpine", "redis:7.0.15", "redis:6.2.20", "redis:7.4", "redis:alpine"} {
		if err := CheckRedisImage(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestAlpineCheckRefusesUnsupportedReleases(t *testing.T) {
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	for _, c := range []struct {
		ref, today string
		ok         bool
	}{
		{"alpine:3.24.2", "2026-12-03", true},
		{"alpine:3.20", "2026-03-31", true},
		{"alpine:3.20", "2026-04-01", false}, // the day its support ended
		{"redis:8.10.2-alpine3.23", "2027-10-31", true},
		{"redis:8.10.2-alpine3.23", "2027-11-01", false},
		{"redis:7.4.11-alpine3.21", "2026-12-03", false},
		{"redis:7.4.6-alpine", "2026-01-01", false}, // which release? the tag hides it
		{"alpine:3", "2026-01-01", false},
		{"alpine:3.18", "2026-01-01", false},  // older than the table
		{"alpine:3.30.1", "2026-01-01", true}, // newer than the table
		{"golang:1.26.8-bookworm", "2026-12-03", true},
		{"prom/prometheus:v2.53.5", "2026-12-03", true},
	} {
		if err := CheckAlpineSupported(c.ref, day(c.today)); (err == nil) != c.ok {
			t.Errorf("%s on %s: err %v, want ok=%v", c.ref, c.today, err, c.ok)
		}
	}
}

func TestKafkaBrokerCheckRefusesPlaintext(t *testing.T) {
	script := "--add-scram"
	for _, u := range KafkaUsers {
		script += " SCRAM-SHA-512=[name=" + u + ",password=x]"
	}
	good := map[string]string{
		"KAFKA_LISTENERS":                            "CLIENT://:9092,CONTROLLER://:9093",
		"KAFKA_ADVERTISED_LISTENERS":                 "CLIENT://kafka-1:9092",
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":       "CLIENT:SASL_SSL,CONTROLLER:PLAINTEXT",
		"KAFKA_CONTROLLER_LISTENER_NAMES":            "CONTROLLER",
		"KAFKA_INTER_BROKER_LISTENER_NAME":           "CLIENT",
		"KAFKA_SASL_ENABLED_MECHANISMS":              "SCRAM-SHA-512",
		"KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL": "SCRAM-SHA-512",
	}
	if errs := CheckKafkaBroker(good, script, []string{"SASL_SSL"}); len(errs) > 0 {
		t.Fatalf("a good broker refused: %v", errs)
	}
	for name, edit := range map[string]func(env map[string]string) string{
		"the pre-SASL listeners": func(env map[string]string) string {
			env["KAFKA_LISTENERS"], env["KAFKA_ADVERTISED_LISTENERS"] = "PLAINTEXT://:9092,CONTROLLER://:9093", "PLAINTEXT://kafka-1:9092"
			env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"], env["KAFKA_INTER_BROKER_LISTENER_NAME"] = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", "PLAINTEXT"
			return script
		},
		"a second, plaintext listener": func(env map[string]string) string {
			env["KAFKA_LISTENERS"] += ",EXTERNAL://:9094"
			env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] += ",EXTERNAL:PLAINTEXT"
			return script
		},
		"the controller advertised": func(env map[string]string) string {
			env["KAFKA_ADVERTISED_LISTENERS"] += ",CONTROLLER://kafka-1:9093"
			return script
		},
		"SASL without TLS where TLS is wanted": func(env map[string]string) string {
			env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] = "CLIENT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
			return script
		},
		"PLAIN enabled": func(env map[string]string) string {
			env["KAFKA_SASL_ENABLED_MECHANISMS"] = "PLAIN,SCRAM-SHA-512"
			return script
		},
		"a SCRAM user missing": func(env map[string]string) string { return strings.Replace(script, "name=flow-sink,", "", 1) },
	} {
		env := maps.Clone(good)
		if errs := CheckKafkaBroker(env, edit(env), []string{"SASL_SSL"}); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestKafkaAuthorizerCheckRefusesOpenBrokers(t *testing.T) {
	good := map[string]string{
		"KAFKA_AUTHORIZER_CLASS_NAME": KafkaAuthorizer,
		"KAFKA_SUPER_USERS":           "User:broker;User:ANONYMOUS",
	}
	if errs := CheckKafkaAuthorizer(good); len(errs) > 0 {
		t.Fatalf("a good broker refused: %v", errs)
	}
	for name, edit := range map[string]func(env map[string]string){
		"no authorizer": func(env map[string]string) { delete(env, "KAFKA_AUTHORIZER_CLASS_NAME") },
		"the ZooKeeper-era authorizer": func(env map[string]string) {
			env["KAFKA_AUTHORIZER_CLASS_NAME"] = "kafka.security.authorizer.AclAuthorizer"
		},
		"a client as super user":        func(env map[string]string) { env["KAFKA_SUPER_USERS"] += ";User:grab-service" },
		"ANONYMOUS missing":             func(env map[string]string) { env["KAFKA_SUPER_USERS"] = "User:broker" },
		"no super users":                func(env map[string]string) { delete(env, "KAFKA_SUPER_USERS") },
		"everyone allowed without ACLs": func(env map[string]string) { env["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"] = "true" },
	} {
		env := maps.Clone(good)
		edit(env)
		if errs := CheckKafkaAuthorizer(env); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

// kafkaInitScript is an init script shaped as the real ones, granting table (lines of
// "user operations type [name]").
func kafkaInitScript(table string) string {
	return `cat > /tmp/client.properties <<EOF
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="$KAFKA_BROKER_PASSWORD";
EOF
while read -r user ops kind name; do
  set -- --allow-principal "User:$user" --operation "$ops" "--$kind" "$name"
  /opt/kafka/bin/kafka-acls.sh --bootstrap-server kafka-1:9092 --command-config /tmp/client.properties --add "$@" </dev/null
done <<'ACLS'
` + table + "\nACLS\n"
}

func TestKafkaACLCheckRefusesBroadGrants(t *testing.T) {
	var lines []string
	for _, a := range KafkaACLs {
		lines = append(lines, a.String())
	}
	table := "# user operations type name\n" + strings.Join(lines, "\n")
	if errs := CheckKafkaACLs(kafkaInitScript(table)); len(errs) > 0 {
		t.Fatalf("a good script refused: %v", errs)
	}
	for name, script := range map[string]string{
		"no table":                 strings.Replace(kafkaInitScript(table), "<<'ACLS'", "<<'GRANTS'", 1),
		"All on a topic":           kafkaInitScript(table + "\ngrab-service All topic promo-grab-flow"),
		"all, lower case":          kafkaInitScript(table + "\nflow-sink all group flashsale-flow-sink"),
		"All outside the table":    kafkaInitScript(table) + "kafka-acls.sh --add --allow-principal User:recovery --operation All --topic promo-grab-flow\n",
		"a wildcard topic":         kafkaInitScript(table + "\ngrab-service Write topic *"),
		"a wildcard group":         kafkaInitScript(table + "\nrecovery Describe group *"),
		"the exporter reads all":   kafkaInitScript(table + "\nkafka-exporter Read topic *"),
		"a wildcard outside":       kafkaInitScript(table) + "kafka-acls.sh --add --allow-principal User:flow-sink --operation Read --topic '*'\n",
		"a prefixed pattern":       kafkaInitScript(table) + "kafka-acls.sh --add --allow-principal User:flow-sink --operation Read --resource-pattern-type prefixed --topic promo\n",
		"a grant beyond the need":  kafkaInitScript(table + "\nrecovery Read topic promo-grab-flow"),
		"a producer reading":       kafkaInitScript(table + "\npromo-admin Read topic promo-state"),
		"a grant to broker":        kafkaInitScript(table + "\nbroker Write topic promo-state"),
		"a grant to a stranger":    kafkaInitScript(table + "\nchecker Describe topic promo-grab-flow"),
		"the sink's group missing": kafkaInitScript(strings.Replace(table, "flow-sink Read group flashsale-flow-sink", "", 1)),
		"recovery granted nothing": kafkaInitScript(strings.ReplaceAll(table, "recovery Describe", "# recovery Describe")),
		"a malformed line":         kafkaInitScript(table + "\ngrab-service Write promo-state"),
		"granted as a client user": strings.Replace(kafkaInitScript(table), `username="broker"`, `username="grab-service"`, 1),
		"no kafka-acls.sh --add":   strings.Replace(kafkaInitScript(table), "--add", "--list", 1),
	} {
		if errs := CheckKafkaACLs(script); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestOpsPolicyCheckRefusesAnOpenOpsPort(t *testing.T) {
	pod := map[string]string{"app.kubernetes.io/name": "grab-service"}
	port := func(n int) []networkingv1.NetworkPolicyPort {
		p := intstr.FromInt(n)
		return []networkingv1.NetworkPolicyPort{{Port: &p}}
	}
	from := func(name string) []networkingv1.NetworkPolicyPeer {
		return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": name}}}}
	}
	policy := func(rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: pod}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, Ingress: rules}}
	}
	api := networkingv1.NetworkPolicyIngressRule{Ports: port(8080)}
	ops := networkingv1.NetworkPolicyIngressRule{Ports: port(9180), From: from("prometheus")}
	if errs := CheckOpsPolicy([]*networkingv1.NetworkPolicy{policy(api, ops)}, pod, 8080, 9180); len(errs) > 0 {
		t.Fatalf("a good policy refused: %v", errs)
	}
	for name, policies := range map[string][]*networkingv1.NetworkPolicy{
		"no policy":                 nil,
		"every port to everyone":    {policy(networkingv1.NetworkPolicyIngressRule{})},
		"ops to everyone":           {policy(api, networkingv1.NetworkPolicyIngressRule{Ports: port(9180)})},
		"ops to the checkout pods":  {policy(api, networkingv1.NetworkPolicyIngressRule{Ports: port(9180), From: from("checkout")})},
		"a second policy opens ops": {policy(api, ops), policy(networkingv1.NetworkPolicyIngressRule{Ports: port(9180)})},
		"Prometheus shut out":       {policy(api)},
		"API shut":                  {policy(ops)},
	} {
		if errs := CheckOpsPolicy(policies, pod, 8080, 9180); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The flow sink runs the healer, with what it needs to reach and follow the shards.
func TestInvocationCheckRefusesASinkThatDoesNotHeal(t *testing.T) {
	good := Invocation{Where: "test", Binary: "recovery", Env: map[string]bool{MySQLEnv: true, RedisUserEnv: true, RedisPasswordEnv: true,
		KafkaMechanismEnv: true, KafkaUserEnv: true, KafkaPasswordEnv: true, NacosPasswordEnv: true},
		Args: []string{"sink", "--heal", "--listen", ":8082", "--ops-listen", ":9182", "--kafka", strings.Join(composeWant.Kafka, ","),
			"--redis", strings.Join(composeWant.Redis, ","), "--redis-sentinels", strings.Join(composeWant.Sentinels, ","),
			"--nacos", "nacos:8848", "--nacos-username", "flashsale", "--redis-allow", "redis-master-*,redis-replica-*", "--max-conns", "1000"}}
	var errs Errs
	CheckInvocation(good, composeWant, &errs, func(s string) { t.Log(s) })
	if len(errs) > 0 {
		t.Fatalf("a good sink refused: %v", errs.Err())
	}
	for name, edit := range map[string]func(inv *Invocation){
		"no --heal":         func(inv *Invocation) { inv.Args = slices.Delete(inv.Args, 1, 2) },
		"no shards":         func(inv *Invocation) { inv.Args = slices.Delete(inv.Args, 8, 10) },
		"no sentinels":      func(inv *Invocation) { inv.Args = slices.Delete(inv.Args, 10, 12) },
		"no switches":       func(inv *Invocation) { inv.Args = slices.Delete(inv.Args, 12, 16) },
		"no Redis ACL user": func(inv *Invocation) { inv.Env = maps.Clone(inv.Env); delete(inv.Env, RedisUserEnv) },
	} {
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

// A command that uses MySQL alone (recovery archive) takes its DSN from the
// environment and carries no other backend's address or credential.
func TestInvocationCheckKeepsARecordOnlyCommandToMySQL(t *testing.T) {
	good := Invocation{Where: "test", Binary: "recovery", Env: map[string]bool{MySQLEnv: true},
		Args: []string{"archive", "--older-than", "720h", "--quiet"}}
	var errs Errs
	CheckInvocation(good, composeWant, &errs, func(s string) { t.Log(s) })
	if len(errs) > 0 {
		t.Fatalf("a good archive refused: %v", errs.Err())
	}
	for name, edit := range map[string]func(inv *Invocation){
		"no DSN":           func(inv *Invocation) { inv.Env = map[string]bool{} },
		"DSN in argv":      func(inv *Invocation) { inv.Args = append(inv.Args, "--mysql", "u:p@tcp(mysql:3306)/flashsale") },
		"Kafka brokers":    func(inv *Invocation) { inv.Args = append(inv.Args, "--kafka", strings.Join(composeWant.Kafka, ",")) },
		"Redis password":   func(inv *Invocation) { inv.Env = map[string]bool{MySQLEnv: true, RedisPasswordEnv: true} },
		"Kafka credential": func(inv *Invocation) { inv.Env = map[string]bool{MySQLEnv: true, KafkaPasswordEnv + "_FILE": true} },
	} {
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

// The topic check refuses a flow topic whose partitions differ from the code's, or
// whose events (or dead letters) Kafka would delete before a long MySQL outage ends.
func TestTopicCheckRefusesWrongPartitionsAndRetention(t *testing.T) {
	create := func(topic, partitions, retention string) []string {
		args := []string{"kafka-topics.sh", "--create", "--if-not-exists", "--topic", topic, "--partitions", partitions, "--config", "min.insync.replicas=2"}
		if retention != "" {
			args = append(args, "--config", "retention.ms="+retention)
		}
		return args
	}
	good := [][]string{create(FlowTopic, "16", "604800000"), create(DeadLetterTopic, "4", "2592000000"), create("promo-state", "4", "")}
	if errs := CheckTopics(TopicsCreated(good), 16); len(errs) > 0 {
		t.Fatalf("good topics refused: %v", errs)
	}
	altered := [][]string{create(FlowTopic, "16", ""), create(DeadLetterTopic, "4", ""),
		{"kafka-configs.sh", "--alter", "--entity-type", "topics", "--entity-name", FlowTopic, "--add-config", "retention.ms=604800000"},
		{"kafka-configs.sh", "--alter", "--entity-type", "topics", "--entity-name", DeadLetterTopic, "--add-config", "retention.ms=2592000000"}}
	if errs := CheckTopics(TopicsCreated(altered), 16); len(errs) > 0 {
		t.Fatalf("retention set by kafka-configs refused: %v", errs)
	}
	for name, calls := range map[string][][]string{
		"8 partitions":          {create(FlowTopic, "8", "604800000"), good[1]},
		"32 partitions":         {create(FlowTopic, "32", "604800000"), good[1]},
		"no retention":          {create(FlowTopic, "16", ""), good[1]},
		"one day's retention":   {create(FlowTopic, "16", "86400000"), good[1]},
		"no flow topic":         {good[1]},
		"no dead-letter topic":  {good[0]},
		"dead letters go first": {good[0], create(DeadLetterTopic, "4", "86400000")},
	} {
		if errs := CheckTopics(TopicsCreated(calls), 16); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSentinelConfCheckRefusesWeakConfigs(t *testing.T) {
	var b strings.Builder
	b.WriteString("port 26379\nrequirepass pw\n")
	for _, u := range SentinelUsers {
		b.WriteString("user " + u + " on >p -@all +auth +hello +ping +sentinel|get-master-addr-by-name\n")
	}
	for i := 0; i < Shards; i++ {
		fmt.Fprintf(&b, "sentinel monitor shard-%d redis-master-%d 6379 2\nsentinel auth-pass shard-%d pw\nsentinel down-after-milliseconds shard-%d 3000\n", i, i, i, i)
	}
	good := b.String()
	if errs := CheckSentinelConf(good, 3); len(errs) > 0 {
		t.Fatalf("a good config refused: %v", errs)
	}
	for name, conf := range map[string]string{
		"quorum of one":         strings.Replace(good, "shard-3 redis-master-3 6379 2", "shard-3 redis-master-3 6379 1", 1),
		"quorum beyond three":   strings.Replace(good, "shard-3 redis-master-3 6379 2", "shard-3 redis-master-3 6379 4", 1),
		"a shard unwatched":     strings.Replace(good, "sentinel monitor shard-15 ", "# sentinel monitor shard-15 ", 1),
		"another prefix":        strings.ReplaceAll(good, "shard-", "redis-"),
		"down after 30 s":       strings.Replace(good, "down-after-milliseconds shard-0 3000", "down-after-milliseconds shard-0 30000", 1),
		"down after 100 ms":     strings.Replace(good, "down-after-milliseconds shard-0 3000", "down-after-milliseconds shard-0 100", 1),
		"no auth-pass":          strings.Replace(good, "sentinel auth-pass shard-7 pw\n", "", 1),
		"no requirepass":        strings.Replace(good, "requirepass pw\n", "", 1),
		"a user may do all":     strings.Replace(good, "user grab-service on >p -@all", "user grab-service on >p +@all", 1),
		"a user may failover":   strings.Replace(good, "user recovery on >p -@all", "user recovery on >p -@all +sentinel|failover", 1),
		"a service has no user": strings.Replace(good, "user promo-admin ", "user someone ", 1),
	} {
		if errs := CheckSentinelConf(conf, 3); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

// manifestCopy is a deep copy of the production manifests' policies and pods, for a
// test to break one rule in.
func manifestCopy(t *testing.T) ([]*networkingv1.NetworkPolicy, []Pod, []object) {
	t.Helper()
	objs := loadManifests(t)
	if t.Failed() {
		t.FailNow()
	}
	var policies []*networkingv1.NetworkPolicy
	for _, np := range policiesOf(objs) {
		policies = append(policies, np.DeepCopy())
	}
	return policies, podsOf(objs), objs
}

func policyNamed(t *testing.T, policies []*networkingv1.NetworkPolicy, name string) *networkingv1.NetworkPolicy {
	t.Helper()
	for _, np := range policies {
		if np.Name == name {
			return np
		}
	}
	t.Fatalf("no NetworkPolicy %s", name)
	return nil
}

func TestNetworkPolicyChecksRefuseBrokenPolicies(t *testing.T) {
	p0, pods, _ := manifestCopy(t)
	all := func(policies []*networkingv1.NetworkPolicy) []string {
		out := CheckDefaultDeny(policies)
		out = append(out, CheckEgress(policies, pods, EgressNeeds)...)
		return append(out, CheckIngressMatchesEgress(policies, pods, EgressNeeds)...)
	}
	if errs := all(p0); len(errs) > 0 {
		t.Fatalf("the production policies refused: %v", errs)
	}
	world := networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}}}
	for name, breakIt := range map[string]func(ps []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy{
		"no default deny": func(ps []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
			return slices.DeleteFunc(ps, func(np *networkingv1.NetworkPolicy) bool { return np.Name == "default-deny" })
		},
		"default deny of ingress only": func(ps []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
			policyNamed(t, ps, "default-deny").Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
			return ps
		},
		"the services' egress gone": func(ps []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
			return slices.DeleteFunc(ps, func(np *networkingv1.NetworkPolicy) bool { return np.Name == "services-egress" })
		},
		"grab-service to the internet": func(ps []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
			np := policyNamed(t, ps, "services-egress")
			np.Spec.Egress = append(np.Spec.Egress, world)
			return ps
		},
		"an egress rule with no destination": func(ps []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
			np := policyNamed(t, ps, "grafana-egress")
			np.Spec.Egress[0].To = nil
			return ps
		},
		"Prometheus' egress for every pod": func(ps []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
			policyNamed(t, ps, "prometheus-egress").Spec.PodSelector = metav1.LabelSelector{}
			return ps
		},
		"DNS in every namespace": func(ps []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
			policyNamed(t, ps, "dns-egress").Spec.Egress[0].To[0].NamespaceSelector = &metav1.LabelSelector{}
			return ps
		},
		"the brokers' quorum port left out": func(ps []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
			np := policyNamed(t, ps, "kafka-egress")
			np.Spec.Egress[0].Ports = np.Spec.Egress[0].Ports[:1]
			return ps
		},
		"MySQL shuts out the migrate job": func(ps []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
			sel := policyNamed(t, ps, "mysql").Spec.Ingress[0].From[0].PodSelector
			sel.MatchExpressions[0].Values = slices.DeleteFunc(sel.MatchExpressions[0].Values, func(v string) bool { return v == "mysql-migrate" })
			return ps
		},
		"Kafka admits Grafana": func(ps []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
			sel := policyNamed(t, ps, "kafka").Spec.Ingress[0].From[0].PodSelector
			sel.MatchExpressions[0].Values = append(sel.MatchExpressions[0].Values, "grafana")
			return ps
		},
	} {
		p, _, _ := manifestCopy(t)
		if errs := all(breakIt(p)); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestAPIIngressCheckRefusesOpenAPIPorts(t *testing.T) {
	p, _, objs := manifestCopy(t)
	labels := func(name string) map[string]string {
		return find(objs, "Deployment", name).obj.(*appsv1.Deployment).Spec.Template.Labels
	}
	if errs := CheckAPIIngress(p, labels("grab-service"), 8080, true); len(errs) > 0 {
		t.Fatalf("production grab-service refused: %v", errs)
	}
	// The API port open to every source.
	policyNamed(t, p, "grab-service-ops").Spec.Ingress[0].From = nil
	if errs := CheckAPIIngress(p, labels("grab-service"), 8080, true); len(errs) == 0 {
		t.Error("grab-service's API port open to all: accepted")
	}
	// The flow sink's unrouted API port opened to the ingress controller.
	np := policyNamed(t, p, "flow-sink-ops")
	np.Spec.Ingress = append(np.Spec.Ingress, *policyNamed(t, p, "promo-admin-ops").Spec.Ingress[0].DeepCopy())
	np.Spec.Ingress[len(np.Spec.Ingress)-1].Ports[0].Port = ptrTo(intstr.FromInt(8082))
	if errs := CheckAPIIngress(p, labels("flow-sink"), 8082, false); len(errs) == 0 {
		t.Error("the flow sink's unrouted API port opened: accepted")
	}
}

// On-call's toolbox reaches promo-admin's API port by label; every pod of the
// namespace, or a pod that does not need the port, is refused.
func TestAPIIngressCheckHoldsInNamespaceClientsToTheirNeeds(t *testing.T) {
	p, pods, objs := manifestCopy(t)
	labels := find(objs, "Deployment", "promo-admin").obj.(*appsv1.Deployment).Spec.Template.Labels
	if errs := CheckAPIIngress(p, labels, 8081, true); len(errs) > 0 {
		t.Fatalf("production promo-admin refused: %v", errs)
	}
	if errs := CheckIngressMatchesEgress(p, pods, EgressNeeds); len(errs) > 0 {
		t.Fatalf("production policies refused: %v", errs)
	}
	rule := &policyNamed(t, p, "promo-admin-ops").Spec.Ingress[1]
	if rule.From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "recovery-toolbox" {
		t.Fatalf("promo-admin-ops rule 2 is not the toolbox's: %+v", rule)
	}
	rule.From[0].PodSelector.MatchLabels = map[string]string{"app.kubernetes.io/name": "grafana"}
	if errs := CheckIngressMatchesEgress(p, pods, EgressNeeds); len(errs) == 0 {
		t.Error("promo-admin's API port admitting grafana, which does not need it: accepted")
	}
	rule.From[0].PodSelector.MatchLabels = nil // every pod of the namespace
	if errs := CheckAPIIngress(p, labels, 8081, true); len(errs) == 0 {
		t.Error("promo-admin's API port open to every pod of the namespace: accepted")
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestPodPrivilegeCheckRefusesLooseSecurityContexts(t *testing.T) {
	_, _, objs := manifestCopy(t)
	base := find(objs, "Deployment", "grab-service").obj.(*appsv1.Deployment).Spec.Template.Spec.DeepCopy()
	if errs := CheckPodPrivilege("grab-service", base, nil, map[string]bool{}); len(errs) > 0 {
		t.Fatalf("production grab-service refused: %v", errs)
	}
	for name, breakIt := range map[string]func(s *corev1.PodSpec){
		"token mounted":                func(s *corev1.PodSpec) { s.AutomountServiceAccountToken = nil },
		"root":                         func(s *corev1.PodSpec) { s.SecurityContext.RunAsNonRoot = ptrTo(false) },
		"user 0":                       func(s *corev1.PodSpec) { s.SecurityContext.RunAsUser = ptrTo(int64(0)) },
		"no seccomp":                   func(s *corev1.PodSpec) { s.SecurityContext.SeccompProfile = nil },
		"unconfined seccomp":           func(s *corev1.PodSpec) { s.SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined },
		"no container securityContext": func(s *corev1.PodSpec) { s.Containers[0].SecurityContext = nil },
		"escalation allowed":           func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptrTo(true) },
		"writable root":                func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.ReadOnlyRootFilesystem = nil },
		"capabilities kept":            func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.Capabilities = nil },
		"a capability added": func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		},
		"privileged": func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.Privileged = ptrTo(true) },
		"a loose init container": func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: s.Containers[0].Image}}
		},
	} {
		s := base.DeepCopy()
		breakIt(s)
		if errs := CheckPodPrivilege("grab-service", s, nil, map[string]bool{}); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
	// A listed exception lets its one rule go, and is marked used.
	s := base.DeepCopy()
	s.Containers[0].SecurityContext.ReadOnlyRootFilesystem = ptrTo(false)
	used := map[string]bool{}
	key := "grab-service/grab-service readOnlyRootFilesystem"
	if errs := CheckPodPrivilege("grab-service", s, map[string]string{key: "a reason"}, used); len(errs) > 0 || !used[key] {
		t.Errorf("an excepted rule: errors %v, used %v", errs, used)
	}
}

func TestToolboxCheckRefusesARunningToolbox(t *testing.T) {
	_, _, objs := manifestCopy(t)
	d := find(objs, "Deployment", "recovery-toolbox").obj.(*appsv1.Deployment).DeepCopy()
	if errs := CheckScaledDown(d); len(errs) > 0 {
		t.Fatalf("production toolbox refused: %v", errs)
	}
	for name, r := range map[string]*int32{"replicas left out": nil, "one replica": ptrTo(int32(1))} {
		d.Spec.Replicas = r
		if errs := CheckScaledDown(d); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestReleaseCheckRefusesServiceImagesWithoutDigest(t *testing.T) {
	refs := []string{"flashsale/grab-service:0.1.0", "redis:8.10.2-alpine3.23@sha256:" + strings.Repeat("ab", 32)}
	digest := "sha256:" + strings.Repeat("1a", 32)
	pinned := []KustomizeImage{{Name: "flashsale/grab-service", NewTag: "0.1.0", Digest: digest}}
	tagged := []KustomizeImage{{Name: "flashsale/grab-service", NewTag: "0.1.0"}}
	if errs := CheckReleaseImages(pinned, refs, true); len(errs) > 0 {
		t.Fatalf("a pinned release refused: %v", errs)
	}
	if errs := CheckReleaseImages(tagged, refs, false); len(errs) > 0 {
		t.Fatalf("a dev build with tags refused: %v", errs)
	}
	for name, c := range map[string]struct {
		images  []KustomizeImage
		release bool
	}{
		"a release without the digest": {tagged, true},
		"no entry for the image":       {nil, false},
		"a digest without the tag":     {[]KustomizeImage{{Name: "flashsale/grab-service", Digest: digest}}, true},
		"a malformed digest":           {[]KustomizeImage{{Name: "flashsale/grab-service", NewTag: "0.1.0", Digest: "sha256:abc"}}, false},
	} {
		if errs := CheckReleaseImages(c.images, refs, c.release); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The CronJob check refuses a schedule that may overlap, start at any hour, run
// without end or keep an unbounded history.
func TestCronJobCheckRefusesOverlapAndNoDeadlines(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	k := func(v int32) *int32 { return &v }
	good := batchv1.CronJob{Spec: batchv1.CronJobSpec{ConcurrencyPolicy: batchv1.ForbidConcurrent, StartingDeadlineSeconds: n(300),
		SuccessfulJobsHistoryLimit: k(3), FailedJobsHistoryLimit: k(3),
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{ActiveDeadlineSeconds: n(900)}}}}
	if p := CheckCronJob(&good); len(p) > 0 {
		t.Fatalf("a good CronJob refused: %v", p)
	}
	for name, edit := range map[string]func(cj *batchv1.CronJob){
		"Allow":             func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent },
		"no start deadline": func(cj *batchv1.CronJob) { cj.Spec.StartingDeadlineSeconds = nil },
		"no Job deadline":   func(cj *batchv1.CronJob) { cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds = nil },
		"no history limit":  func(cj *batchv1.CronJob) { cj.Spec.FailedJobsHistoryLimit = nil },
		"history of 100":    func(cj *batchv1.CronJob) { cj.Spec.SuccessfulJobsHistoryLimit = k(100) },
	} {
		cj := good
		edit(&cj)
		if p := CheckCronJob(&cj); len(p) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}
