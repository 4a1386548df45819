package validate

import (
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// mountsFile reports whether path lies under one of the container's mounts.
func mountsFile(c corev1.Container) func(string) bool {
	return func(path string) bool {
		return path != "" && slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
		})
	}
}

// TLS inside, Kubernetes: the shards and sentinels speak TLS only and their probes
// too; MySQL requires TLS; Nacos serves HTTPS and gRPC over TLS; every service
// container asks for TLS to each backend it uses, with the CA mounted; the exporter
// scrapes rediss://.
func TestKubernetesTLSInside(t *testing.T) {
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	var errs Errs
	for _, o := range objs {
		ss, ok := o.obj.(*appsv1.StatefulSet)
		if !ok || (ss.Spec.Template.Labels["app.kubernetes.io/name"] != "redis" && ss.Name != "redis-sentinel") {
			continue
		}
		c := ss.Spec.Template.Spec.Containers[0]
		for _, e := range CheckRedisTLSConf(strings.Join(c.Args, "\n")) {
			errs.Addf("%s: %s", o.where(), e)
		}
		if p := c.ReadinessProbe; p == nil || p.Exec == nil || !slices.Contains(p.Exec.Command, "--tls") {
			errs.Addf("%s: the readiness probe must speak TLS (redis-cli --tls)", o.where())
		}
	}
	checkMySQLServerTLS(&errs, objs)
	checkNacosTLS(&errs, objs)
	for _, o := range objs {
		for _, c := range podContainers(o) {
			if !strings.HasPrefix(c.Image, "flashsale/") {
				continue
			}
			all := strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
			env := containerEnv(c.Env)
			_, redis := flagValue(c.Args, "redis")
			_, nacos := flagValue(c.Args, "nacos")
			redis = redis || env["REDIS"] != "" || strings.Contains(all, "--redis")
			nacos = nacos || env["NACOS"] != ""
			for _, e := range CheckTLSEnv(env, redis, nacos, mountsFile(c)) {
				errs.Addf("%s container %s: %s", o.where(), c.Name, e)
			}
		}
	}
	if o := find(objs, "Deployment", "redis-exporter"); o == nil || containerEnv(podContainers(*o)[0].Env)["REDIS_EXPORTER_TLS_CA_CERT_FILE"] == "" {
		errs.Addf("Deployment redis-exporter: REDIS_EXPORTER_TLS_CA_CERT_FILE must name the shards' CA")
	}
	prom, _ := os.ReadFile(Path(PromConfigK8s))
	if strings.Contains(string(prom), "- redis://") {
		errs.Addf("%s: the redis job scrapes redis://; the shards speak TLS only (rediss://)", PromConfigK8s)
	}
	checkIngressTLS(&errs, objs)
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

func checkMySQLServerTLS(errs *Errs, objs []object) {
	o := find(objs, "StatefulSet", "mysql")
	if o == nil {
		errs.Addf("no StatefulSet mysql")
		return
	}
	args := strings.Join(podContainers(*o)[0].Args, " ")
	for _, want := range []string{"--ssl-cert=", "--ssl-key=", "--ssl-ca=", "--require-secure-transport=ON"} {
		if !strings.Contains(args, want) {
			errs.Addf("%s: no %s: MySQL must require TLS of every TCP client", o.where(), want)
		}
	}
}

func checkNacosTLS(errs *Errs, objs []object) {
	o := find(objs, "StatefulSet", "nacos")
	if o == nil {
		errs.Addf("no StatefulSet nacos")
		return
	}
	c := podContainers(*o)[0]
	opts := containerEnv(c.Env)["JAVA_OPT_EXT"]
	for _, want := range []string{"-Dserver.ssl.enabled=true", "-Dnacos.remote.server.rpc.tls.enableTls=true", "-Dnacos.remote.server.rpc.tls.compatibility=false"} {
		if !strings.Contains(opts, want) {
			errs.Addf("%s: JAVA_OPT_EXT lacks %s: Nacos must serve HTTPS and gRPC over TLS only", o.where(), want)
		}
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			errs.Addf("%s: probes must use scheme HTTPS", o.where())
		}
	}
	if j := find(objs, "Job", "nacos-seed"); j == nil || !slices.ContainsFunc(podContainers(*j)[0].Command, func(a string) bool { return strings.HasPrefix(a, "https://") }) {
		errs.Addf("Job nacos-seed must reach Nacos over https://")
	}
}

// checkIngressTLS: an Ingress routes grab-service and promo-admin, every host it
// serves is under a tls entry with a Secret, and none routes an ops port.
func checkIngressTLS(errs *Errs, objs []object) {
	routed := map[string]bool{}
	for _, o := range objs {
		ing, ok := o.obj.(*networkingv1.Ingress)
		if !ok {
			continue
		}
		var tlsHosts []string
		for _, tls := range ing.Spec.TLS {
			if tls.SecretName == "" {
				errs.Addf("%s: a tls entry without secretName", o.where())
			}
			tlsHosts = append(tlsHosts, tls.Hosts...)
		}
		for _, r := range ing.Spec.Rules {
			if r.Host == "" || !slices.Contains(tlsHosts, r.Host) {
				errs.Addf("%s: host %q is served without TLS", o.where(), r.Host)
			}
			if r.HTTP == nil {
				continue
			}
			for _, p := range r.HTTP.Paths {
				if s := p.Backend.Service; s != nil {
					routed[s.Name] = true
					if s.Port.Name == "ops" || strings.HasSuffix(s.Name, "-pods") {
						errs.Addf("%s: routes an ops port (%s)", o.where(), s.Name)
					}
				}
			}
		}
	}
	for _, svc := range []string{"grab-service", "promo-admin"} {
		if !routed[svc] {
			errs.Addf("no Ingress with TLS routes %s: its public API must be reached over HTTPS", svc)
		}
	}
}

// TLS at the compose stack's edge: a proxy terminates TLS for grab-service and
// promo-admin and publishes the HTTPS ports.
func TestComposePublicTLS(t *testing.T) {
	p, err := loadCompose(t, composeEnv(t), "*")
	if err != nil {
		t.Fatal(err)
	}
	var errs Errs
	var proxy string
	for _, s := range p.Services {
		if name, _, _ := splitImage(s.Image); name == "haproxy" {
			proxy = s.Name
		}
	}
	if proxy == "" {
		t.Fatal("compose: no TLS-terminating proxy (an haproxy service) in front of the services")
	}
	cfg, err := os.ReadFile(Path("deploy", "compose", "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(cfg)
	for _, want := range []string{"grab-service:8080", "promo-admin:8081", "ssl-min-ver TLSv1.2"} {
		if !strings.Contains(text, want) {
			errs.Addf("deploy/compose/haproxy.cfg: no %q", want)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "bind" && !slices.Contains(f, "ssl") {
			errs.Addf("deploy/compose/haproxy.cfg: %q listens without TLS", strings.TrimSpace(line))
		}
	}
	if len(p.Services[proxy].Ports) == 0 || len(p.Services[proxy].Secrets) == 0 {
		errs.Addf("compose %s: must publish its HTTPS ports and mount the certificate as a secret", proxy)
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

func TestTLSChecksRefuseWeakSettings(t *testing.T) {
	if len(CheckRedisTLSConf("port 6379\nrequirepass x\n")) == 0 {
		t.Error("a plaintext Redis config accepted")
	}
	if e := CheckRedisTLSConf("port 0\ntls-port 6379\ntls-cert-file a\ntls-key-file b\ntls-ca-cert-file c\ntls-replication yes\n"); len(e) > 0 {
		t.Errorf("a TLS-only config refused: %v", e)
	}
	for _, bad := range []string{"u:p@tcp(mysql:3306)/db?parseTime=true", "u:p@tcp(mysql:3306)/db?tls=skip-verify", "u:p@tcp(mysql:3306)/db?tls=preferred", "u:p@tcp(mysql:3306)/db?tls=false", ""} {
		if CheckMySQLDSNTLS(bad) == nil {
			t.Errorf("DSN %q accepted", bad)
		}
	}
	if err := CheckMySQLDSNTLS("u:$(P)@tcp(mysql:3306)/db?parseTime=true&tls=true"); err != nil {
		t.Error(err)
	}
	none := func(string) bool { return false }
	if len(CheckTLSEnv(map[string]string{MySQLEnv: ""}, true, true, none)) < 5 {
		t.Error("a service without TLS settings accepted")
	}
}
