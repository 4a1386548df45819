package validate

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flashsale/platform/deploy/validate/k8sgen"
)

// The production hardening: every backend behind credentials, /metrics and pprof
// apart from the public API, images named by version.

// promScrape is the part of a Prometheus config the ops-port check reads.
type promScrape struct {
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		DNSSDConfigs []struct {
			Names []string `yaml:"names"`
			Port  int      `yaml:"port"`
		} `yaml:"dns_sd_configs"`
	} `yaml:"scrape_configs"`
}

func loadPromScrape(t *testing.T, path string) promScrape {
	data, err := os.ReadFile(Path(path))
	if err != nil {
		t.Fatal(err)
	}
	var ps promScrape
	if err := yaml.Unmarshal(data, &ps); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ps
}

// serviceJobs are the scrape jobs of the three services.
var serviceJobs = []string{"grab-service", "promo-admin", "flow-sink"}

// flagValue is the value of --name in args (--name V or --name=V).
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// composeOpsPorts: compose service -> the port of its --ops-listen.
func composeOpsPorts(p *types.Project) map[string]string {
	out := map[string]string{}
	for _, s := range p.Services {
		if o, ok := flagValue(append(slices.Clone([]string(s.Entrypoint)), s.Command...), "ops-listen"); ok {
			out[s.Name] = strings.TrimPrefix(o, ":")
		}
	}
	return out
}

// Compose: Prometheus scrapes each service on its ops port, and nothing scrapes an
// API port; the ops ports are not published beyond the host's loopback.
func TestComposeOpsPorts(t *testing.T) {
	p, err := loadCompose(t, composeEnv(t), "*")
	if err != nil {
		t.Fatal(err)
	}
	ops := composeOpsPorts(p)
	var errs Errs
	for _, name := range serviceJobs {
		if ops[name] == "" {
			errs.Addf("compose %s: no --ops-listen", name)
		}
	}
	scraped := map[string]bool{}
	for _, sc := range loadPromScrape(t, PromConfig).ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				host, port, err := net.SplitHostPort(target)
				if err != nil {
					continue // redis://... targets of the exporter's /scrape
				}
				svc, ok := p.Services[host]
				if !ok {
					continue
				}
				if want := ops[host]; svc.Build != nil && port != want {
					errs.Addf("%s job %s: target %s is not %s's ops port (%s): /metrics is served there only", PromConfig, sc.JobName, target, host, want)
				} else if svc.Build != nil {
					scraped[host] = true
				}
			}
		}
	}
	for _, name := range serviceJobs {
		if !scraped[name] {
			errs.Addf("%s: nothing scrapes %s's ops port", PromConfig, name)
		}
	}
	for name, port := range ops {
		for _, pub := range p.Services[name].Ports {
			if pub.Target == mustAtoi(port) && pub.HostIP != "127.0.0.1" {
				errs.Addf("compose %s publishes its ops port %s on %q: only 127.0.0.1 may reach it", name, port, pub.HostIP)
			}
		}
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

func mustAtoi(s string) uint32 {
	n, _ := strconv.Atoi(s)
	return uint32(n)
}

// Kubernetes: each service's pods name their ops port, only the headless -pods
// Service (Prometheus' discovery) carries it, Prometheus scrapes it there, and the
// NetworkPolicies admit Prometheus alone to it.
func TestKubernetesOpsPorts(t *testing.T) {
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	var errs Errs
	var policies []*networkingv1.NetworkPolicy
	for _, o := range objs {
		if np, ok := o.obj.(*networkingv1.NetworkPolicy); ok {
			policies = append(policies, np)
		}
	}
	sdPorts := map[string]int{}
	for _, sc := range loadPromScrape(t, PromConfigK8s).ScrapeConfigs {
		for _, sd := range sc.DNSSDConfigs {
			for _, n := range sd.Names {
				sdPorts[strings.TrimSuffix(n, "."+k8sgen.Namespace+".svc.cluster.local")] = sd.Port
			}
		}
	}
	for _, name := range serviceJobs {
		o := find(objs, "Deployment", name)
		if o == nil {
			errs.Addf("no Deployment %s", name)
			continue
		}
		pod := o.obj.(*appsv1.Deployment).Spec.Template
		c := pod.Spec.Containers[0]
		ops, _ := flagValue(c.Args, "ops-listen")
		api, _ := flagValue(c.Args, "listen")
		opsPort, apiPort := int(mustAtoi(strings.TrimPrefix(ops, ":"))), int(mustAtoi(strings.TrimPrefix(api, ":")))
		named := false
		for _, p := range c.Ports {
			if p.Name == "ops" {
				named = int(p.ContainerPort) == opsPort && opsPort != 0
			}
		}
		if !named {
			errs.Addf("%s: no container port named ops on --ops-listen %q", o.where(), ops)
		}
		for _, so := range objs {
			svc, ok := so.obj.(*corev1.Service)
			if !ok || len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
				continue
			}
			for _, sp := range svc.Spec.Ports {
				toOps := sp.TargetPort == intstr.FromString("ops") || sp.TargetPort.IntValue() == opsPort
				if toOps && svc.Spec.ClusterIP != corev1.ClusterIPNone {
					errs.Addf("%s: carries %s's ops port; clients' Services carry the API port only", so.where(), name)
				}
				if toOps && sdPorts[svc.Name] != int(sp.Port) {
					errs.Addf("%s job %s: scrapes port %d of %s, whose ops port is %d", PromConfigK8s, name, sdPorts[svc.Name], svc.Name, sp.Port)
				}
				if p, ok := sdPorts[svc.Name]; ok && !toOps && p == int(sp.Port) {
					errs.Addf("%s job %s: scrapes %s port %d, which is not the ops port", PromConfigK8s, name, svc.Name, p)
				}
			}
		}
		if _, ok := sdPorts[name+"-pods"]; !ok {
			errs.Addf("%s: Prometheus does not discover %s-pods", PromConfigK8s, name)
		}
		if !routedServices(objs)[name] {
			apiPort = 0 // no client: CheckAPIIngress holds it shut
		}
		for _, p := range CheckOpsPolicy(policies, pod.Labels, apiPort, opsPort) {
			errs.Addf("%s: %s", o.where(), p)
		}
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

var envRefRe = regexp.MustCompile(`^\$\{[A-Z][A-Z0-9_]*(:\?[^}]*)?\}$`)

// Nacos runs with auth on; its token key and identity come from .env or the Secret,
// never from a value in a committed file; the seed logs in before it writes.
func TestNacosAuth(t *testing.T) {
	var errs Errs
	raw, err := os.ReadFile(Path(ComposeFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	env := doc.Services["nacos"].Environment
	if env["NACOS_AUTH_ENABLE"] != "true" {
		errs.Addf("%s nacos: NACOS_AUTH_ENABLE %q, want \"true\"", ComposeFile, env["NACOS_AUTH_ENABLE"])
	}
	for _, k := range []string{"NACOS_AUTH_TOKEN", "NACOS_AUTH_IDENTITY_KEY", "NACOS_AUTH_IDENTITY_VALUE"} {
		if !envRefRe.MatchString(env[k]) {
			errs.Addf("%s nacos: %s is %q; want a reference to .env (${%s:?...}), never a value in the file", ComposeFile, k, env[k], k)
		}
	}
	script, err := os.ReadFile(Path(NacosInitScript))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/v1/auth/login", "accessToken@", "/v1/cs/configs"} {
		if !strings.Contains(string(script), want) {
			errs.Addf("%s: no %q: the seed must log in and publish with its access token", NacosInitScript, want)
		}
	}
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	if o := find(objs, "StatefulSet", "nacos"); o == nil {
		errs.Addf("no StatefulSet nacos")
	} else {
		c := o.obj.(*appsv1.StatefulSet).Spec.Template.Spec.Containers[0]
		kenv := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			kenv[e.Name] = e
		}
		if kenv["NACOS_AUTH_ENABLE"].Value != "true" {
			errs.Addf("%s: NACOS_AUTH_ENABLE %q, want \"true\"", o.where(), kenv["NACOS_AUTH_ENABLE"].Value)
		}
		for _, k := range []string{"NACOS_AUTH_TOKEN", "NACOS_AUTH_IDENTITY_KEY", "NACOS_AUTH_IDENTITY_VALUE"} {
			if e := kenv[k]; e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				errs.Addf("%s: %s must come from Secret flashsale-secrets, never a value in the file", o.where(), k)
			}
		}
	}
	if j := find(objs, "Job", "nacos-seed"); j == nil || !strings.Contains(strings.Join(podContainers(*j)[0].Command, " "), "nacos-init.sh") {
		errs.Addf("Job nacos-seed must run nacos-init.sh (it logs in)")
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

// Kafka: no broker offers a PLAINTEXT listener to clients (SASL_SSL, compose and
// Kubernetes alike), the SCRAM users exist, every Kafka client carries its
// credentials, and only the brokers reach the controller listener.
func TestKafkaSASL(t *testing.T) {
	p, err := loadCompose(t, composeEnv(t), "*")
	if err != nil {
		t.Fatal(err)
	}
	var errs Errs
	brokerScript := ""
	for _, b := range composeWant.Kafka {
		name := strings.TrimSuffix(b, ":9092")
		s := p.Services[name]
		env := serviceEnv(s.Environment)
		brokerScript = strings.Join(append(slices.Clone([]string(s.Entrypoint)), s.Command...), " ")
		for _, e := range CheckKafkaBroker(env, brokerScript, []string{"SASL_SSL"}) {
			errs.Addf("compose %s: %s", name, e)
		}
		if hc := strings.Join(s.HealthCheck.Test, " "); !strings.Contains(hc, "--command-config") {
			errs.Addf("compose %s: the healthcheck must authenticate (--command-config)", name)
		}
	}
	for _, s := range p.Services {
		all := strings.Join(append(slices.Clone([]string(s.Entrypoint)), s.Command...), " ")
		if u := s.Environment[KafkaUserEnv]; u != nil && !slices.Contains(KafkaUsers, *u) {
			errs.Addf("compose %s: Kafka user %q is not created by the brokers (%v)", s.Name, *u, KafkaUsers)
		}
		if strings.Contains(all, "kafka-topics.sh") && !strings.Contains(all, "--command-config") {
			errs.Addf("compose %s: kafka-topics.sh without --command-config (SASL)", s.Name)
		}
		if strings.Contains(all, "kafka_exporter") && (!strings.Contains(all, "--sasl.enabled") || !strings.Contains(all, "--sasl.mechanism=scram-sha512")) {
			errs.Addf("compose %s: the exporter must authenticate with SCRAM-SHA-512", s.Name)
		}
	}
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	if o := find(objs, "StatefulSet", "kafka"); o == nil {
		errs.Addf("no StatefulSet kafka")
	} else {
		c := o.obj.(*appsv1.StatefulSet).Spec.Template.Spec.Containers[0]
		env := containerEnv(c.Env)
		for _, e := range CheckKafkaBroker(env, strings.Join(c.Args, " "), []string{"SASL_SSL"}) {
			errs.Addf("%s: %s", o.where(), e)
		}
		if !strings.HasSuffix(env["KAFKA_SSL_KEYSTORE_LOCATION"], ".p12") || env["KAFKA_SSL_TRUSTSTORE_LOCATION"] == "" {
			errs.Addf("%s: SASL_SSL needs KAFKA_SSL_KEYSTORE_LOCATION and KAFKA_SSL_TRUSTSTORE_LOCATION (Secret kafka-tls)", o.where())
		}
	}
	for _, o := range objs {
		for _, c := range podContainers(o) {
			env := containerEnv(c.Env)
			all := strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
			if strings.HasPrefix(c.Image, "flashsale/") && !IsRecordOnly(c.Args) { // a MySQL-only command has no Kafka client
				if _, ok := env[KafkaUserEnv]; !ok || env[KafkaTLSEnv] != "true" || env[KafkaCAEnv] == "" || !slices.Contains(KafkaUsers, env[KafkaUserEnv]) {
					errs.Addf("%s container %s: Kafka clients need %s (a user of %v), %s=true and %s", o.where(), c.Name, KafkaUserEnv, KafkaUsers, KafkaTLSEnv, KafkaCAEnv)
				}
			}
			if strings.Contains(all, "kafka-topics.sh") && !strings.Contains(all, "--command-config") {
				errs.Addf("%s: kafka-topics.sh without --command-config (SASL)", o.where())
			}
			if strings.Contains(all, "kafka_exporter") && (!strings.Contains(all, "--sasl.enabled") || !strings.Contains(all, "--tls.enabled")) {
				errs.Addf("%s: the exporter must use SASL and TLS", o.where())
			}
		}
	}
	// The controller listener admits the brokers alone.
	for _, o := range objs {
		np, ok := o.obj.(*networkingv1.NetworkPolicy)
		if !ok || np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "kafka" {
			continue
		}
		for _, rule := range np.Spec.Ingress {
			controller := len(rule.Ports) == 0
			for _, port := range rule.Ports {
				controller = controller || port.Port.IntValue() == 9093
			}
			if !controller {
				continue
			}
			for _, peer := range rule.From {
				for _, e := range peer.PodSelector.MatchExpressions {
					if slices.ContainsFunc(e.Values, func(v string) bool { return v != "kafka" }) {
						errs.Addf("%s: the controller listener (9093) admits %v; only the brokers", o.where(), e.Values)
					}
				}
			}
		}
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

// Kafka ACLs: the brokers authorize (StandardAuthorizer, super users broker and
// ANONYMOUS only) and each init script grants every client user exactly what it
// needs. The scripts also run, under sh with stand-ins for Kafka's tools, so the loop
// is seen to turn the table into those kafka-acls.sh calls, and the topics it creates
// are seen to have the partitions the code expects and a retention (CheckTopics).
func TestKafkaACLs(t *testing.T) {
	p, err := loadCompose(t, composeEnv(t), "*")
	if err != nil {
		t.Fatal(err)
	}
	var errs Errs
	for _, b := range composeWant.Kafka {
		name := strings.TrimSuffix(b, ":9092")
		env := serviceEnv(p.Services[name].Environment)
		for _, e := range CheckKafkaAuthorizer(env) {
			errs.Addf("compose %s: %s", name, e)
		}
	}
	flowPartitions, err := FlowPartitions(Root())
	if err != nil {
		errs.Addf("%v", err)
	}
	scripts := map[string]string{}
	if cmd := p.Services["kafka-init"].Command; len(cmd) == 1 {
		scripts["compose kafka-init"] = cmd[0]
	} else {
		errs.Addf("compose kafka-init: want one script as its command, have %d", len(cmd))
	}
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	if o := find(objs, "StatefulSet", "kafka"); o == nil {
		errs.Addf("no StatefulSet kafka")
	} else {
		env := containerEnv(podContainers(*o)[0].Env)
		for _, e := range CheckKafkaAuthorizer(env) {
			errs.Addf("%s: %s", o.where(), e)
		}
	}
	if o := find(objs, "Job", "kafka-topics"); o == nil {
		errs.Addf("no Job kafka-topics")
	} else if args := podContainers(*o)[0].Args; len(args) == 1 {
		scripts[o.where()] = args[0]
	} else {
		errs.Addf("%s: want one script as its args, have %d", o.where(), len(args))
	}
	for where, script := range scripts {
		for _, e := range CheckKafkaACLs(script) {
			errs.Addf("%s: %s", where, e)
		}
		table, err := KafkaGrants(script)
		if err != nil {
			continue // reported above
		}
		ran, calls := runKafkaInit(t, &errs, where, script)
		for _, e := range CheckTopics(TopicsCreated(calls), flowPartitions) {
			errs.Addf("%s: %s", where, e)
		}
		sortACLs := func(a []KafkaACL) []string {
			out := make([]string, len(a))
			for i, g := range a {
				out[i] = g.String()
			}
			slices.Sort(out)
			return out
		}
		if got, want := sortACLs(ran), sortACLs(table); !slices.Equal(got, want) {
			errs.Addf("%s: run, the script grants\n  %v\nbut its table says\n  %v", where, got, want)
		}
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

// runKafkaInit runs an init script under sh (dash where /bin/sh is, as in the images)
// with stand-ins for Kafka's tools that log their arguments, and returns the grants of
// its kafka-acls.sh calls and every call.
func runKafkaInit(t *testing.T, errs *Errs, where, script string) ([]KafkaACL, [][]string) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Logf("%s: no sh to run the script: %v", where, err)
		return nil, nil
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	stub := "#!/bin/sh\n{ printf '%s\\t' \"${0##*/}\" \"$@\"; echo; } >>\"$CALLS\"\n"
	for _, tool := range []string{"kafka-topics.sh", "kafka-configs.sh", "kafka-acls.sh"} {
		if err := os.WriteFile(filepath.Join(dir, "bin", tool), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	props := filepath.Join(dir, "client.properties")
	script = strings.NewReplacer("/opt/kafka/bin/", filepath.Join(dir, "bin")+"/", "/tmp/client.properties", props).Replace(script)
	calls := filepath.Join(dir, "calls")
	cmd := exec.Command(sh, "-ec", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CALLS=" + calls, "KAFKA_BROKER_PASSWORD=secret"}
	if out, err := cmd.CombinedOutput(); err != nil {
		errs.Addf("%s: the script fails under %s: %v\n%s", where, sh, err, out)
		return nil, nil
	}
	if b, err := os.ReadFile(props); err != nil || !strings.Contains(string(b), `username="broker" password="secret"`) {
		errs.Addf("%s: the script writes no client settings for user broker (%v)", where, err)
	}
	log, err := os.ReadFile(calls)
	if err != nil {
		errs.Addf("%s: the script runs no Kafka tool: %v", where, err)
		return nil, nil
	}
	var grants []KafkaACL
	var made [][]string
	for _, line := range strings.Split(strings.TrimRight(string(log), "\n"), "\n") {
		args := strings.Split(strings.TrimSuffix(line, "\t"), "\t")
		made = append(made, args)
		if args[0] != "kafka-acls.sh" {
			continue
		}
		value := func(name string) string {
			v, _ := flagValue(args, name)
			return v
		}
		if !slices.Contains(args, "--add") || value("command-config") != props || value("bootstrap-server") == "" {
			errs.Addf("%s: kafka-acls.sh %v: want --add, --bootstrap-server and --command-config (the broker user)", where, args[1:])
		}
		g := KafkaACL{User: strings.TrimPrefix(value("allow-principal"), "User:")}
		switch {
		case slices.Contains(args, "--cluster"):
			g.Type = "cluster"
		case value("topic") != "":
			g.Type, g.Name = "topic", value("topic")
		case value("group") != "":
			g.Type, g.Name = "group", value("group")
		}
		for i, a := range args {
			if a == "--operation" && i+1 < len(args) {
				g.Operation = args[i+1]
				grants = append(grants, g)
			}
		}
	}
	return grants, made
}

// The exporters log in as users of their own: never a service's, never a backend's
// default or root user.
func TestExportersHaveTheirOwnUsers(t *testing.T) {
	env := composeEnv(t)
	p, err := loadCompose(t, env, "*")
	if err != nil {
		t.Fatal(err)
	}
	var errs Errs
	serviceUsers := []string{"", "default", "root", "flashsale", "grab-service", "promo-admin", "recovery", "flow-sink", "broker", "nacos"}
	get := func(s types.ServiceConfig, k string) string {
		if v := s.Environment[k]; v != nil {
			return *v
		}
		return ""
	}
	re := p.Services["redis-exporter"]
	if u := get(re, "REDIS_USER"); slices.Contains(serviceUsers, u) {
		errs.Addf("compose redis-exporter: REDIS_USER %q, want a user of its own", u)
	} else {
		checkRedisExporterACL(&errs, "compose redis-master-0", strings.Join(p.Services["redis-master-0"].Entrypoint, " "), u)
	}
	if pw := get(re, "REDIS_PASSWORD"); pw == "" || pw != env["REDIS_EXPORTER_PASSWORD"] {
		errs.Addf("compose redis-exporter: REDIS_PASSWORD must be REDIS_EXPORTER_PASSWORD")
	}
	checkMySQLExporter(&errs, "compose mysqld-exporter", strings.Join(append(slices.Clone([]string(p.Services["mysqld-exporter"].Entrypoint)), p.Services["mysqld-exporter"].Command...), " "))
	if v := get(p.Services["mysqld-exporter"], "MYSQLD_EXPORTER_PASSWORD"); v != "" {
		errs.Addf("compose mysqld-exporter: its password comes from the secret file, not MYSQLD_EXPORTER_PASSWORD in the environment")
	}
	if ke := strings.Join(p.Services["kafka-exporter"].Command, " "); !strings.Contains(ke, "--sasl.username=kafka-exporter") {
		errs.Addf("compose kafka-exporter: must log in as SCRAM user kafka-exporter")
	}

	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	secretKey := func(c corev1.Container, name string) string {
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return e.ValueFrom.SecretKeyRef.Key
			}
		}
		return ""
	}
	value := func(c corev1.Container, name string) string {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
		return ""
	}
	if o := find(objs, "Deployment", "redis-exporter"); o != nil {
		c := podContainers(*o)[0]
		if u := value(c, "REDIS_USER"); slices.Contains(serviceUsers, u) || secretKey(c, "REDIS_PASSWORD") != "redis-exporter-password" {
			errs.Addf("%s: REDIS_USER %q with key %q; want its own user and key redis-exporter-password", o.where(), u, secretKey(c, "REDIS_PASSWORD"))
		}
		if ss := find(objs, "StatefulSet", "redis-shard-0"); ss != nil {
			checkRedisExporterACL(&errs, ss.where(), strings.Join(podContainers(*ss)[0].Args, " "), value(c, "REDIS_USER"))
		}
	}
	if o := find(objs, "Deployment", "mysqld-exporter"); o != nil {
		c := podContainers(*o)[0]
		checkMySQLExporter(&errs, o.where(), strings.Join(append(slices.Clone(c.Command), c.Args...), " "))
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Key != "mysql-exporter-password" {
				errs.Addf("%s: reads Secret key %s; only mysql-exporter-password is its own", o.where(), e.ValueFrom.SecretKeyRef.Key)
			}
		}
	}
	if o := find(objs, "Deployment", "kafka-exporter"); o != nil {
		c := podContainers(*o)[0]
		if !strings.Contains(strings.Join(c.Args, " "), "--sasl.username=kafka-exporter") || secretKey(c, "KAFKA_EXPORTER_PASSWORD") != "kafka-exporter-password" {
			errs.Addf("%s: must log in as SCRAM user kafka-exporter with key kafka-exporter-password", o.where())
		}
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

// checkRedisExporterACL: the servers define the exporter's user, with no key and no
// more than the reads it makes.
func checkRedisExporterACL(errs *Errs, where, script, user string) {
	m := regexp.MustCompile(`(?m)user ` + regexp.QuoteMeta(user) + ` on (.*)$`).FindStringSubmatch(script)
	if user == "" || m == nil {
		errs.Addf("%s: defines no ACL user %q for the exporter", where, user)
		return
	}
	for _, bad := range []string{"~*", "allkeys", "+@all", "allcommands", "+config", "+@admin", "+@dangerous", "nopass"} {
		if strings.Contains(m[1], bad) {
			errs.Addf("%s: the exporter's ACL user has %s; it needs INFO-like reads only", where, bad)
		}
	}
	if !strings.Contains(m[1], "-@all") || !strings.Contains(m[1], "+info") {
		errs.Addf("%s: the exporter's ACL user must start from -@all and allow +info", where)
	}
}

// checkMySQLExporter: the exporter's user is its own, and MySQL's first-start script
// creates it with the grants the exporter needs.
func checkMySQLExporter(errs *Errs, where, cmd string) {
	m := regexp.MustCompile(`--mysqld\.username=(\S+)`).FindStringSubmatch(cmd)
	if m == nil || slices.Contains([]string{"root", "flashsale"}, m[1]) {
		errs.Addf("%s: --mysqld.username must name the exporter's own user, have %v", where, m)
		return
	}
	sql, err := os.ReadFile(Path(MySQLInitScript))
	if err != nil {
		errs.Addf("%v", err)
		return
	}
	for _, want := range []string{"CREATE USER IF NOT EXISTS '" + m[1] + "'", "GRANT PROCESS, REPLICATION CLIENT ON *.* TO '" + m[1] + "'", "GRANT SELECT ON performance_schema.* TO '" + m[1] + "'"} {
		if !strings.Contains(string(sql), want) {
			errs.Addf("%s: %s lacks %q", where, MySQLInitScript, want)
		}
	}
}

// serviceEnv is a compose service's environment with its values set (a variable
// listed without a value is left out).
func serviceEnv(m types.MappingWithEquals) map[string]string {
	env := map[string]string{}
	for k, v := range m {
		if v != nil {
			env[k] = *v
		}
	}
	return env
}

// containerEnv is a container's literal env values by name (valueFrom ones are "").
func containerEnv(vars []corev1.EnvVar) map[string]string {
	env := map[string]string{}
	for _, e := range vars {
		env[e.Name] = e.Value
	}
	return env
}
