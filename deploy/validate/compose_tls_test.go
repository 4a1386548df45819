package validate

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// TLS inside, compose: as Kubernetes does it (TestKubernetesTLSInside), with the
// material deploy/compose/make-certs.sh writes into deploy/compose/tls.
const (
	ComposeTLSDir    = "deploy/compose/tls"
	ComposeCertsTool = "deploy/compose/make-certs.sh"
)

// underComposeTLS: a host path inside the TLS material's directory, which exists once
// make-certs.sh has run (never in the repository).
func underComposeTLS(path string) bool {
	return strings.HasPrefix(path, Path(ComposeTLSDir)+string(filepath.Separator)) || path == Path(ComposeTLSDir)
}

// composeTLSMounts: container path -> the TLS directory (relative to
// ComposeTLSDir) that a service bind-mounts there.
func composeTLSMounts(s types.ServiceConfig) map[string]string {
	out := map[string]string{}
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind && underComposeTLS(v.Source) {
			rel, _ := filepath.Rel(Path(ComposeTLSDir), v.Source)
			out[strings.TrimSuffix(v.Target, "/")] = rel
		}
	}
	return out
}

// composeTLSFile reports whether path is a file under one of the service's TLS mounts.
func composeTLSFile(s types.ServiceConfig) func(string) bool {
	mounts := composeTLSMounts(s)
	return func(path string) bool {
		for target := range mounts {
			if path != "" && strings.HasPrefix(path, target+"/") {
				return true
			}
		}
		return false
	}
}

// composeScript is everything a service runs: entrypoint, command and healthcheck.
func composeScript(s types.ServiceConfig) string {
	all := append(slices.Clone([]string(s.Entrypoint)), s.Command...)
	if s.HealthCheck != nil {
		all = append(all, s.HealthCheck.Test...)
	}
	return strings.Join(all, " ")
}

// CheckComposeTLS lists what of TLS inside the compose project lacks: the Redis
// servers and sentinels TLS only, MySQL requiring it, Nacos on HTTPS and gRPC over
// TLS, Kafka SASL_SSL, and every client of them (services, init jobs, exporters,
// healthchecks) speaking TLS with the CA mounted.
func CheckComposeTLS(p *types.Project) []string {
	var errs Errs
	for _, s := range p.Services {
		if name, _, _ := splitImage(s.Image); name == "redis" {
			checkComposeRedisTLS(&errs, s)
		}
	}
	checkComposeMySQLTLS(&errs, p)
	checkComposeNacosTLS(&errs, p)
	checkComposeKafkaTLS(&errs, p)
	for _, s := range p.Services {
		if s.Build != nil {
			checkComposeServiceTLS(&errs, s)
		}
	}
	return errs
}

func checkComposeRedisTLS(errs *Errs, s types.ServiceConfig) {
	script := composeScript(s)
	for _, e := range CheckRedisTLSConf(strings.Join(s.Entrypoint, "\n")) {
		errs.Addf("compose %s: %s", s.Name, e)
	}
	if i := slices.Index(s.Command, "--port"); i >= 0 && i+1 < len(s.Command) && s.Command[i+1] != "0" {
		errs.Addf("compose %s: --port %s opens a plaintext port", s.Name, s.Command[i+1])
	}
	if hc := s.HealthCheck; hc == nil || !slices.Contains(hc.Test, "--tls") || !slices.Contains(hc.Test, "--cacert") {
		errs.Addf("compose %s: the healthcheck must speak TLS (redis-cli --tls --cacert)", s.Name)
	}
	for _, f := range regexp.MustCompile(`tls-(?:cert|key|ca-cert)-file (\S+)`).FindAllStringSubmatch(script, -1) {
		if !composeTLSFile(s)(f[1]) {
			errs.Addf("compose %s: %s is not in a TLS directory it mounts (make-certs.sh)", s.Name, f[1])
		}
	}
	// A replica names itself as its certificate does: a sentinel's answer after a
	// failover is what the services then dial and verify.
	if slices.Contains(s.Command, "--replicaof") || strings.HasPrefix(s.Name, "redis-master-") {
		if i := slices.Index(s.Command, "--replica-announce-ip"); i < 0 || i+1 >= len(s.Command) || s.Command[i+1] != s.Name {
			errs.Addf("compose %s: --replica-announce-ip %s is missing: the sentinels would name it by IP, which its certificate does not", s.Name, s.Name)
		}
	}
}

func checkComposeMySQLTLS(errs *Errs, p *types.Project) {
	m, ok := p.Services["mysql"]
	if !ok {
		errs.Addf("compose: no service mysql")
		return
	}
	args := strings.Join(m.Command, " ")
	for _, want := range []string{"--ssl-cert=", "--ssl-key=", "--ssl-ca=", "--require-secure-transport=ON"} {
		if !strings.Contains(args, want) {
			errs.Addf("compose mysql: no %s: MySQL must require TLS of every TCP client", want)
		}
	}
	for _, f := range regexp.MustCompile(`--ssl-(?:cert|key|ca)=(\S+)`).FindAllStringSubmatch(args, -1) {
		if !composeTLSFile(m)(f[1]) {
			errs.Addf("compose mysql: %s is not in a TLS directory it mounts (make-certs.sh)", f[1])
		}
	}
	// Every mysql or mysqladmin call (healthcheck, grants) verifies the server.
	for _, s := range p.Services {
		script := composeScript(s)
		if !regexp.MustCompile(`\bmysql(admin)? `).MatchString(script) {
			continue
		}
		if !strings.Contains(script, "--ssl-mode=VERIFY_IDENTITY") {
			errs.Addf("compose %s: mysql client without --ssl-mode=VERIFY_IDENTITY", s.Name)
		}
		if ca := regexp.MustCompile(`--ssl-ca=(\S+)`).FindStringSubmatch(script); ca == nil || !composeTLSFile(s)(ca[1]) {
			errs.Addf("compose %s: mysql client without --ssl-ca naming a CA it mounts", s.Name)
		}
	}
	if s, ok := p.Services["mysqld-exporter"]; ok {
		script := composeScript(s)
		ca := regexp.MustCompile(`ssl-ca=(\S+?)(\\n|\s|$)`).FindStringSubmatch(script)
		if !strings.Contains(script, "--config.my-cnf=") || ca == nil || !composeTLSFile(s)(ca[1]) {
			errs.Addf("compose mysqld-exporter: must read a my.cnf whose ssl-ca is the CA it mounts")
		}
	}
}

func checkComposeNacosTLS(errs *Errs, p *types.Project) {
	n := p.Services["nacos"]
	opts := ""
	if v := n.Environment["JAVA_OPT_EXT"]; v != nil {
		opts = *v
	}
	for _, want := range []string{"-Dserver.ssl.enabled=true", "-Dnacos.remote.server.rpc.tls.enableTls=true", "-Dnacos.remote.server.rpc.tls.compatibility=false"} {
		if !strings.Contains(opts, want) {
			errs.Addf("compose nacos: JAVA_OPT_EXT lacks %s: Nacos must serve HTTPS and gRPC over TLS only", want)
		}
	}
	for _, f := range regexp.MustCompile(`(?:=file:|=)(/etc/\S+)`).FindAllStringSubmatch(opts, -1) {
		if !composeTLSFile(n)(f[1]) {
			errs.Addf("compose nacos: %s is not in a TLS directory it mounts (make-certs.sh)", f[1])
		}
	}
	if hc := composeScript(n); !strings.Contains(hc, "https://") || strings.Contains(hc, "http://") {
		errs.Addf("compose nacos: the healthcheck must ask over https://")
	}
	i := p.Services["nacos-init"]
	ca := ""
	if v := i.Environment["CURL_CA_BUNDLE"]; v != nil {
		ca = *v
	}
	if !strings.Contains(composeScript(i), "https://nacos:") || !composeTLSFile(i)(ca) {
		errs.Addf("compose nacos-init: must reach Nacos over https:// with CURL_CA_BUNDLE a CA it mounts")
	}
}

func checkComposeKafkaTLS(errs *Errs, p *types.Project) {
	for _, b := range composeWant.Kafka {
		name := strings.TrimSuffix(b, ":9092")
		s := p.Services[name]
		env := serviceEnv(s.Environment)
		for _, e := range CheckKafkaBroker(env, composeScript(s), []string{"SASL_SSL"}) {
			errs.Addf("compose %s: %s", name, e)
		}
		for _, k := range []string{"KAFKA_SSL_KEYSTORE_LOCATION", "KAFKA_SSL_TRUSTSTORE_LOCATION"} {
			if !composeTLSFile(s)(env[k]) {
				errs.Addf("compose %s: %s=%q is not in a TLS directory it mounts (make-certs.sh)", name, k, env[k])
			}
		}
	}
	for _, s := range p.Services {
		script := composeScript(s)
		if strings.Contains(script, "security.protocol=") && (!strings.Contains(script, "security.protocol=SASL_SSL") || strings.Contains(script, "SASL_PLAINTEXT")) {
			errs.Addf("compose %s: Kafka client settings must say security.protocol=SASL_SSL", s.Name)
		}
		if loc := regexp.MustCompile(`ssl\.truststore\.location=(\S+)`).FindStringSubmatch(script); strings.Contains(script, "security.protocol=") && (loc == nil || !composeTLSFile(s)(loc[1])) {
			errs.Addf("compose %s: Kafka client settings without ssl.truststore.location naming a CA it mounts", s.Name)
		}
		if strings.Contains(script, "kafka_exporter") {
			ca := regexp.MustCompile(`--tls\.ca-file=(\S+)`).FindStringSubmatch(script)
			if !strings.Contains(script, "--tls.enabled") || ca == nil || !composeTLSFile(s)(ca[1]) {
				errs.Addf("compose %s: the exporter must speak TLS (--tls.enabled, --tls.ca-file a CA it mounts)", s.Name)
			}
		}
		if strings.Contains(script, "redis_exporter") || strings.HasPrefix(s.Image, "oliver006/redis_exporter") {
			if v := s.Environment["REDIS_EXPORTER_TLS_CA_CERT_FILE"]; v == nil || !composeTLSFile(s)(*v) {
				errs.Addf("compose %s: REDIS_EXPORTER_TLS_CA_CERT_FILE must name the servers' CA, mounted", s.Name)
			}
		}
	}
}

// checkComposeServiceTLS: a service of the platform asks for TLS to each backend it
// is given, the CA mounted (the Kubernetes rule, CheckTLSEnv, plus Kafka).
func checkComposeServiceTLS(errs *Errs, s types.ServiceConfig) {
	env := serviceEnv(s.Environment)
	args := append(slices.Clone([]string(s.Entrypoint)), s.Command...)
	has := func(flag string) bool {
		_, ok := flagValue(args, flag)
		return ok
	}
	redis, nacos := has("redis"), has("nacos")
	if i := slices.Index(args, "/usr/local/bin/configctl"); i >= 0 {
		nacos = true
	}
	for _, e := range CheckTLSEnv(env, redis, nacos, composeTLSFile(s)) {
		errs.Addf("compose %s: %s", s.Name, e)
	}
	if has("kafka") {
		if env[KafkaTLSEnv] != "true" {
			errs.Addf("compose %s: %s=%q, want \"true\"", s.Name, KafkaTLSEnv, env[KafkaTLSEnv])
		}
		if !composeTLSFile(s)(env[KafkaCAEnv]) {
			errs.Addf("compose %s: %s=%q is no file the container mounts (Kafka's CA)", s.Name, KafkaCAEnv, env[KafkaCAEnv])
		}
	}
}

func TestComposeTLSInside(t *testing.T) {
	p, err := loadCompose(t, composeEnv(t), "*")
	if err != nil {
		t.Fatal(err)
	}
	if errs := Errs(CheckComposeTLS(p)); errs.Err() != nil {
		t.Error(errs.Err())
	}
}

// The compose TLS rule refuses each weakening, one at a time, of the real file.
func TestComposeTLSRefusesWeakSettings(t *testing.T) {
	env := composeEnv(t)
	set := func(s *types.ServiceConfig, k, v string) { s.Environment[k] = &v }
	cases := map[string]func(p *types.Project){
		"a Redis master with a plaintext port": func(p *types.Project) {
			s := p.Services["redis-master-3"]
			s.Entrypoint = slices.Clone(s.Entrypoint)
			s.Entrypoint[2] = strings.Replace(s.Entrypoint[2], "port 0\n", "port 6379\n", 1)
			p.Services["redis-master-3"] = s
		},
		"a replica replicating in plaintext": func(p *types.Project) {
			s := p.Services["redis-replica-2"]
			s.Entrypoint = slices.Clone(s.Entrypoint)
			s.Entrypoint[2] = strings.Replace(s.Entrypoint[2], "tls-replication yes", "tls-replication no", 1)
			p.Services["redis-replica-2"] = s
		},
		"a sentinel healthcheck without TLS": func(p *types.Project) {
			s := p.Services["redis-sentinel-1"]
			s.HealthCheck = &types.HealthCheckConfig{Test: []string{"CMD", "redis-cli", "-p", "26379", "ping"}}
			p.Services["redis-sentinel-1"] = s
		},
		"a replica announcing its IP": func(p *types.Project) {
			s := p.Services["redis-replica-5"]
			s.Command = s.Command[:slices.Index(s.Command, "--replica-announce-ip")]
			p.Services["redis-replica-5"] = s
		},
		"Redis without its certificate mounted": func(p *types.Project) {
			s := p.Services["redis-master-0"]
			s.Volumes = nil
			p.Services["redis-master-0"] = s
		},
		"MySQL not requiring TLS": func(p *types.Project) {
			s := p.Services["mysql"]
			s.Command = slices.DeleteFunc(slices.Clone(s.Command), func(a string) bool { return a == "--require-secure-transport=ON" })
			p.Services["mysql"] = s
		},
		"the grants job without verification": func(p *types.Project) {
			s := p.Services["mysql-grants"]
			s.Entrypoint = []string{"/bin/bash", "-ec", "bash /etc/flashsale/security/apply-grants.sh after | mysql -h mysql -u root"}
			p.Services["mysql-grants"] = s
		},
		"a service DSN without tls=": func(p *types.Project) {
			s := p.Services["flow-sink"]
			set(&s, MySQLEnv, "u:p@tcp(mysql:3306)/flashsale?parseTime=true")
			p.Services["flow-sink"] = s
		},
		"a service without Redis TLS": func(p *types.Project) {
			s := p.Services["grab-service"]
			delete(s.Environment, RedisTLSEnv)
			p.Services["grab-service"] = s
		},
		"a service without the CA mounted": func(p *types.Project) {
			s := p.Services["promo-admin"]
			s.Volumes = nil
			p.Services["promo-admin"] = s
		},
		"recovery without Kafka TLS": func(p *types.Project) {
			s := p.Services["recovery-verify"]
			set(&s, KafkaTLSEnv, "false")
			p.Services["recovery-verify"] = s
		},
		"configctl without Nacos TLS": func(p *types.Project) {
			s := p.Services["configctl"]
			delete(s.Environment, NacosTLSEnv)
			p.Services["configctl"] = s
		},
		"Nacos on plain HTTP": func(p *types.Project) {
			s := p.Services["nacos"]
			set(&s, "JAVA_OPT_EXT", "-Dserver.ssl.enabled=false")
			p.Services["nacos"] = s
		},
		"nacos-init over http://": func(p *types.Project) {
			s := p.Services["nacos-init"]
			s.Entrypoint = []string{"/bin/sh", "/nacos-init.sh", "http://nacos:8848/nacos", "/switches.json"}
			p.Services["nacos-init"] = s
		},
		"a broker on SASL_PLAINTEXT": func(p *types.Project) {
			s := p.Services["kafka-2"]
			set(&s, "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "CLIENT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT")
			p.Services["kafka-2"] = s
		},
		"kafka-init on SASL_PLAINTEXT": func(p *types.Project) {
			s := p.Services["kafka-init"]
			s.Command = []string{strings.ReplaceAll(s.Command[0], "SASL_SSL", "SASL_PLAINTEXT")}
			p.Services["kafka-init"] = s
		},
		"the Kafka exporter without TLS": func(p *types.Project) {
			s := p.Services["kafka-exporter"]
			s.Command = []string{strings.ReplaceAll(s.Command[0], "--tls.enabled", "")}
			p.Services["kafka-exporter"] = s
		},
		"the Redis exporter without the CA": func(p *types.Project) {
			s := p.Services["redis-exporter"]
			delete(s.Environment, "REDIS_EXPORTER_TLS_CA_CERT_FILE")
			p.Services["redis-exporter"] = s
		},
		"the MySQL exporter without the CA": func(p *types.Project) {
			s := p.Services["mysqld-exporter"]
			s.Command = []string{strings.ReplaceAll(s.Command[0], "--config.my-cnf=/tmp/my.cnf ", "")}
			p.Services["mysqld-exporter"] = s
		},
	}
	for name, weaken := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := loadCompose(t, env, "*")
			if err != nil {
				t.Fatal(err)
			}
			before := len(CheckComposeTLS(p))
			weaken(p)
			if after := len(CheckComposeTLS(p)); after <= before {
				t.Errorf("not refused (%d findings before, %d after)", before, after)
			}
		})
	}
}

// The Redis exporter scrapes the compose servers over TLS: its targets must be
// rediss://, in deploy/observability/prometheus/prometheus.yml (not a compose file;
// its change is pending with that file's owner, so this reports rather than fails
// until the targets move).
func TestComposeRedisScrapesOverTLS(t *testing.T) {
	prom, err := os.ReadFile(Path(PromConfig))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(prom), "- redis://") {
		t.Errorf("%s: the redis job scrapes redis://; the compose servers speak TLS only, so its targets must be rediss://", PromConfig)
	}
	if !strings.Contains(string(prom), "- rediss://redis-master-0:6379") {
		t.Errorf("%s: the redis job does not scrape rediss://redis-master-0:6379", PromConfig)
	}
}

// make-certs.sh, run into a temporary directory, writes every file compose mounts
// from deploy/compose/tls, certificates the CA verifies for every name a client
// dials, and on a second run keeps every key.
func TestComposeTLSMaterial(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	dir := filepath.Join(t.TempDir(), "tls")
	run := func(args ...string) string {
		cmd := exec.Command("sh", append([]string{Path(ComposeCertsTool)}, args...)...)
		cmd.Env = append(os.Environ(), "TLS_BITS=2048") // shorter keys: the test's time, not the script's logic
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make-certs.sh %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run(dir)
	p, err := loadCompose(t, composeEnv(t), "*")
	if err != nil {
		t.Fatal(err)
	}
	checkComposeTLSFilesExist(t, p, dir)
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM(readTLSFile(t, filepath.Join(dir, "ca", "ca.crt"))) {
		t.Fatal("ca/ca.crt holds no certificate")
	}
	names := map[string][]string{"mysql": {"mysql", "127.0.0.1"}, "nacos": {"nacos", "127.0.0.1"}, "kafka": {"kafka-1", "kafka-2", "kafka-3", "localhost"}}
	for _, s := range p.Services {
		if name, _, _ := splitImage(s.Image); name == "redis" {
			names["redis"] = append(names["redis"], s.Name)
		}
	}
	for cert, hosts := range names {
		checkCertNames(t, filepath.Join(dir, cert, "tls.crt"), ca, hosts)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %v, want 0700 (the keys' only guard on the host)", dir, st.Mode())
	}
	if st, err := os.Stat(filepath.Join(dir, "ca.key")); err != nil || st.Mode().Perm()&0o077 != 0 {
		t.Errorf("ca.key readable by others than its owner (%v)", err)
	}
	key := readTLSFile(t, filepath.Join(dir, "redis", "tls.key"))
	if out := run(dir); strings.Contains(out, "wrote ") || string(readTLSFile(t, filepath.Join(dir, "redis", "tls.key"))) != string(key) {
		t.Errorf("a second run wrote again:\n%s", out)
	}
	if out := run("--force", dir); !strings.Contains(out, "wrote "+filepath.Join(dir, "redis", "tls.key")) || string(readTLSFile(t, filepath.Join(dir, "redis", "tls.key"))) == string(key) {
		t.Errorf("--force kept the Redis key:\n%s", out)
	}
}

// checkComposeTLSFilesExist: every mounted TLS directory exists under dir, and so
// does every file a service names under such a mount (certificates, keys, CAs).
func checkComposeTLSFilesExist(t *testing.T, p *types.Project, dir string) {
	t.Helper()
	pathRe := regexp.MustCompile(`/[A-Za-z0-9._/-]+`)
	for _, s := range p.Services {
		mounts := composeTLSMounts(s)
		text := composeScript(s)
		for _, v := range s.Environment {
			if v != nil {
				text += " " + *v
			}
		}
		for target, rel := range mounts {
			if st, err := os.Stat(filepath.Join(dir, rel)); err != nil || !st.IsDir() {
				t.Errorf("compose %s mounts %s/%s, which make-certs.sh does not make", s.Name, ComposeTLSDir, rel)
			}
			for _, path := range pathRe.FindAllString(text, -1) {
				if f, ok := strings.CutPrefix(path, target+"/"); ok {
					if _, err := os.Stat(filepath.Join(dir, rel, f)); err != nil {
						t.Errorf("compose %s reads %s: make-certs.sh makes no %s/%s/%s", s.Name, path, ComposeTLSDir, rel, f)
					}
				}
			}
		}
	}
	for _, sec := range p.Secrets {
		if underComposeTLS(sec.File) {
			rel, _ := filepath.Rel(Path(ComposeTLSDir), sec.File)
			if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
				t.Errorf("compose secret %s: make-certs.sh makes no %s/%s", sec.Name, ComposeTLSDir, rel)
			}
		}
	}
}

// checkCertNames: the certificate chains to ca for each host (a name or an IP).
func checkCertNames(t *testing.T, file string, ca *x509.CertPool, hosts []string) {
	t.Helper()
	block, _ := pem.Decode(readTLSFile(t, file))
	if block == nil {
		t.Fatalf("%s: no PEM", file)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, h := range hosts {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca, DNSName: h, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("%s for %s: %v", file, h, err)
		}
	}
	if _, err := exec.Command("openssl", "verify", "-CAfile", filepath.Join(filepath.Dir(file), "ca.crt"), file).CombinedOutput(); err != nil {
		t.Errorf("openssl verify %s: %v", file, err)
	}
}

func readTLSFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", path, err))
	}
	return b
}
