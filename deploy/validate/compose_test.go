package validate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// Compose files.
const (
	ComposeFile     = "deploy/compose/compose.yaml"
	ComposeEnv      = "deploy/compose/.env.example"
	ComposeSwitches = "deploy/compose/switches.json"
	NacosInitScript = "deploy/compose/nacos-init.sh"
	MySQLInitScript = "deploy/compose/mysql-init/10-exporter-user.sh"
)

var composeWant = Expected{
	Redis: func() []string {
		out := make([]string, Shards)
		for i := range out {
			out[i] = fmt.Sprintf("redis-master-%d:6379", i)
		}
		return out
	}(),
	Sentinels: []string{"redis-sentinel-1:26379", "redis-sentinel-2:26379", "redis-sentinel-3:26379"},
	Kafka:     []string{"kafka-1:9092", "kafka-2:9092", "kafka-3:9092"},
	Nacos:     "nacos:8848",
	ShardHosts: func() []string {
		var out []string
		for i := range Shards {
			out = append(out, fmt.Sprintf("redis-master-%d", i), fmt.Sprintf("redis-replica-%d", i))
		}
		return out
	}(),
	ShardPrefixes: []string{"redis-master-", "redis-replica-"},
}

// composeShardHosts are the names of the compose file's Redis servers (not its
// sentinels): the hosts a service reaches a shard at.
func composeShardHosts(p *types.Project) []string {
	var out []string
	for _, s := range p.Services {
		cmd := strings.Join(append(slices.Clone([]string(s.Entrypoint)), s.Command...), " ")
		if strings.HasPrefix(s.Image, "redis:") && !strings.Contains(cmd, "sentinel") {
			out = append(out, s.Name)
		}
	}
	return out
}

func loadCompose(t *testing.T, env map[string]string, profiles ...string) (*types.Project, error) {
	dir := filepath.Dir(Path(ComposeFile))
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: Path(ComposeFile)}},
		Environment: env,
	}, func(o *loader.Options) {
		o.SetProjectName("flashsale", true)
		o.Profiles = profiles
		o.ResolvePaths = true
	})
}

func composeEnv(t *testing.T) map[string]string {
	env, err := dotenv.GetEnvFromFile(map[string]string{}, []string{Path(ComposeEnv)})
	if err != nil {
		t.Fatalf("%s: %v", ComposeEnv, err)
	}
	return env
}

// The compose file loads under the compose-spec schema (compose-go, the library of
// `docker compose`), with every profile, from the documented .env.
func TestComposeLoads(t *testing.T) {
	p, err := loadCompose(t, composeEnv(t), "*")
	if err != nil {
		t.Fatalf("%s: %v", ComposeFile, err)
	}
	if p.Name != "flashsale" {
		t.Errorf("project name %q", p.Name)
	}
}

// No credential has a default: without the .env every secret is refused.
func TestComposeRequiresSecrets(t *testing.T) {
	env := composeEnv(t)
	for _, secret := range []string{"FLASHSALE_CHECKOUT_TOKEN", "FLASHSALE_ADMIN_TOKEN", "FLASHSALE_VIEWER_TOKEN", "FLASHSALE_ONCALL_TOKEN", "FLASHSALE_APPROVER_TOKEN", "MYSQL_ROOT_PASSWORD", "MYSQL_PASSWORD", "GRAFANA_ADMIN_PASSWORD",
		"REDIS_EXPORTER_PASSWORD", "KAFKA_BROKER_PASSWORD", "KAFKA_GRAB_PASSWORD", "KAFKA_PROMO_ADMIN_PASSWORD", "KAFKA_FLOW_SINK_PASSWORD",
		"KAFKA_RECOVERY_PASSWORD", "KAFKA_EXPORTER_PASSWORD", "NACOS_AUTH_TOKEN", "NACOS_AUTH_IDENTITY_KEY", "NACOS_AUTH_IDENTITY_VALUE",
		"NACOS_ADMIN_PASSWORD", "NACOS_PASSWORD", "NACOS_CONFIGCTL_PASSWORD", "NACOS_PROMO_ADMIN_PASSWORD"} {
		without := map[string]string{}
		for k, v := range env {
			if k != secret {
				without[k] = v
			}
		}
		if _, err := loadCompose(t, without, "*"); err == nil || !strings.Contains(err.Error(), secret) {
			t.Errorf("compose loads without %s (err %v): it must be required", secret, err)
		}
	}
}

func TestComposeStack(t *testing.T) {
	p, err := loadCompose(t, composeEnv(t), "*")
	if err != nil {
		t.Fatal(err)
	}
	var errs Errs
	svc := func(name string) types.ServiceConfig {
		s, err := p.GetService(name)
		if err != nil {
			errs.Addf("no service %s", name)
		}
		return s
	}
	// Redis: 16 masters without persistence, each with at least one replica of it.
	replicas := map[string]int{}
	for _, s := range p.Services {
		if i := slices.Index(s.Command, "--replicaof"); i >= 0 && i+1 < len(s.Command) {
			replicas[s.Command[i+1]]++
			checkRedisCommand(&errs, s.Name, s.Command)
		}
	}
	for i := 0; i < Shards; i++ {
		name := fmt.Sprintf("redis-master-%d", i)
		m := svc(name)
		checkRedisCommand(&errs, name, m.Command)
		if slices.Contains(m.Command, "--replicaof") {
			errs.Addf("%s must be a master", name)
		}
		if replicas[name] < 1 {
			errs.Addf("%s has no replica", name)
		}
	}
	// Kafka: 3 KRaft brokers, RF 3, min.insync.replicas 2, no auto-created topics.
	voters := ""
	for _, b := range composeWant.Kafka {
		name := strings.TrimSuffix(b, ":9092")
		env := svc(name).Environment
		get := func(k string) string {
			if v := env[k]; v != nil {
				return *v
			}
			return ""
		}
		for k, want := range map[string]string{
			"KAFKA_DEFAULT_REPLICATION_FACTOR":               "3",
			"KAFKA_MIN_INSYNC_REPLICAS":                      "2",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "3",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "3",
			"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                "false",
			"KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE":           "false",
			"KAFKA_ADVERTISED_LISTENERS":                     "CLIENT://" + b,
		} {
			if get(k) != want {
				errs.Addf("%s: %s=%q, want %q", name, k, get(k), want)
			}
		}
		if !strings.Contains(get("KAFKA_PROCESS_ROLES"), "controller") || get("KAFKA_ZOOKEEPER_CONNECT") != "" {
			errs.Addf("%s: must run KRaft (a controller role, no ZooKeeper)", name)
		}
		if voters == "" {
			voters = get("KAFKA_CONTROLLER_QUORUM_VOTERS")
		} else if voters != get("KAFKA_CONTROLLER_QUORUM_VOTERS") {
			errs.Addf("%s: controller quorum differs from the first broker's", name)
		}
	}
	if n := len(strings.Split(voters, ",")); n != 3 {
		errs.Addf("KRaft quorum has %d voters, want 3", n)
	}
	checkTopicInit(&errs, "kafka-init", strings.Join(svc("kafka-init").Command, " "))

	// Nacos gets the switches document once.
	checkSwitchesDoc(&errs, ComposeSwitches)
	initCmd := strings.Join(svc("nacos-init").Command, " ") + strings.Join(svc("nacos-init").Entrypoint, " ")
	if script, err := os.ReadFile(Path(NacosInitScript)); err != nil {
		errs.Addf("%v", err)
	} else {
		initCmd += string(script)
	}
	dataID, group := switchesDocID(t)
	if !strings.Contains(initCmd, "dataId="+dataID) || !strings.Contains(initCmd, "group="+group) {
		errs.Addf("nacos-init must publish dataId %s, group %s", dataID, group)
	}

	// The services.
	var invs []Invocation
	for _, s := range p.Services {
		if s.Build == nil {
			continue
		}
		target := s.Build.Target
		if _, ok := ServiceTargets[target]; !ok {
			errs.Addf("%s builds unknown target %q", s.Name, target)
		}
		if s.Build.Context != Root() || s.Build.Dockerfile != Dockerfile {
			errs.Addf("%s: build context %s, dockerfile %s; want the repository root and %s", s.Name, s.Build.Context, s.Build.Dockerfile, Dockerfile)
		}
		if !strings.HasPrefix(s.Image, "flashsale/"+target+":") {
			errs.Addf("%s: image %q, want flashsale/%s:TAG", s.Name, s.Image, target)
		}
		args := append(slices.Clone([]string(s.Entrypoint)), s.Command...)
		binary := ServiceTargets[target].Binary
		if len(s.Entrypoint) > 0 {
			binary = filepath.Base(s.Entrypoint[0])
			args = args[1:]
		}
		env, values := map[string]bool{}, map[string]string{}
		for k, v := range s.Environment {
			env[k] = v != nil && *v != ""
			if env[k] {
				values[k] = *v
			}
		}
		inv := Invocation{Where: ComposeFile + " " + s.Name, Binary: binary, Args: args, Env: env, EnvValue: values}
		invs = append(invs, inv)
		if len(s.Profiles) == 0 {
			port := ServiceTargets[target].Port
			hc := s.HealthCheck
			if hc == nil || !slices.Contains(hc.Test, "http://127.0.0.1:"+port+"/readyz") {
				errs.Addf("%s: healthcheck must ask /readyz on :%s", s.Name, port)
			}
			if s.Restart != "unless-stopped" {
				errs.Addf("%s: restart %q, want unless-stopped", s.Name, s.Restart)
			}
		}
	}
	for _, inv := range invs {
		CheckInvocation(inv, composeWant, &errs, func(s string) { t.Log(s) })
	}
	CheckIPv6PrefixAgree(invs, &errs)
	if extra, missing := diff(composeShardHosts(p), composeWant.ShardHosts); len(extra)+len(missing) > 0 {
		errs.Addf("compose's Redis servers differ from the shards the --redis-allow rule knows: more %v, fewer %v", extra, missing)
	}
	for _, want := range []string{"grab-service", "promo-admin", "flow-sink", "recovery-verify", "recovery-rebuild", "prometheus", "grafana", "mysql", "nacos"} {
		svc(want)
	}

	// Every image is pinned; host paths mounted exist (the TLS material once
	// make-certs.sh has run: TestComposeTLSMaterial); Grafana gets what it provisions.
	for _, s := range p.Services {
		if !strings.Contains(s.Image, ":") || strings.HasSuffix(s.Image, ":latest") {
			errs.Addf("%s: image %q must be pinned to a version", s.Name, s.Image)
		}
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind && !underComposeTLS(v.Source) {
				if _, err := os.Stat(v.Source); err != nil {
					errs.Addf("%s mounts %s, which does not exist", s.Name, v.Source)
				}
			}
		}
	}
	checkGrafanaMounts(&errs, svc("grafana").Volumes)
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

func checkRedisCommand(errs *Errs, name string, cmd []string) {
	joined := strings.Join(cmd, " ")
	if !strings.Contains(joined, "--maxmemory-policy noeviction") {
		errs.Addf("%s: Redis must never evict (--maxmemory-policy noeviction): a lost ledger key breaks the invariants", name)
	}
}

var topicRe = regexp.MustCompile(`--partitions`)

// checkTopicInit: the init command creates the topics replicated to 3 brokers with
// min.insync.replicas 2 and an explicit retention. Which topics, their partitions and
// retentions: TestKafkaACLs runs the script and CheckTopics judges what it created.
func checkTopicInit(errs *Errs, where, cmd string) {
	for _, want := range []string{FlowTopic, DeadLetterTopic, "--replication-factor 3", "min.insync.replicas=2", "--if-not-exists", "retention.ms="} {
		if !strings.Contains(cmd, want) {
			errs.Addf("%s: topic creation lacks %q", where, want)
		}
	}
	if !topicRe.MatchString(cmd) {
		errs.Addf("%s: topic creation sets no partition count", where)
	}
}

// checkGrafanaMounts: provisioning and dashboards land where the provisioning says.
func checkGrafanaMounts(errs *Errs, vols []types.ServiceVolumeConfig) {
	mounted := map[string]string{}
	for _, v := range vols {
		mounted[v.Target] = v.Source
	}
	if mounted["/etc/grafana/provisioning"] != Path(GrafanaProvisioning) {
		errs.Addf("grafana: %s must be mounted at /etc/grafana/provisioning", GrafanaProvisioning)
	}
	if path := dashboardProviderPath(errs); mounted[path] != Path(DashboardDir) {
		errs.Addf("grafana: %s must be mounted at %s (the provider's path)", DashboardDir, path)
	}
}

// The Redis servers replace the image's entrypoint, which is what drops root in the
// image; so compose names the image's redis user itself.
func TestComposeRedisIsNotRoot(t *testing.T) {
	p, err := loadCompose(t, composeEnv(t), "*")
	if err != nil {
		t.Fatal(err)
	}
	n, sentinels := 0, 0
	for _, s := range p.Services {
		if name, _, _ := splitImage(s.Image); name != "redis" {
			continue
		}
		if strings.HasPrefix(s.Name, "redis-sentinel-") {
			sentinels++
		} else {
			n++
		}
		if uid, _, _ := strings.Cut(s.User, ":"); uid == "" || uid == "0" || uid == "root" {
			t.Errorf("compose %s runs redis-server as root (user %q)", s.Name, s.User)
		}
	}
	if n != 32 {
		t.Errorf("%d Redis servers, want 16 masters and 16 replicas", n)
	}
	if sentinels != len(composeWant.Sentinels) {
		t.Errorf("%d Redis Sentinels, want %d", sentinels, len(composeWant.Sentinels))
	}
}
