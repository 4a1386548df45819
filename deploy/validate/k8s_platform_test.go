package validate

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/flashsale/platform/deploy/validate/k8sgen"
)

// checkPlatform: the platform's own rules for the Kubernetes manifests.
func checkPlatform(errs *Errs, t *testing.T, objs []object) {
	// The three services: probes on the ops listener's /readyz and /healthz (the
	// public listener's /readyz says ready or not and nothing more), and how each is started.
	for _, name := range []string{"grab-service", "promo-admin", "flow-sink"} {
		o := find(objs, "Deployment", name)
		if o == nil {
			errs.Addf("no Deployment %s", name)
			continue
		}
		c := o.obj.(*appsv1.Deployment).Spec.Template.Spec.Containers[0]
		if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.StrVal != "ops" {
			errs.Addf("%s: readiness probe must GET /readyz on port ops", o.where())
		}
		if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.StrVal != "ops" {
			errs.Addf("%s: liveness probe must GET /healthz on port ops (never /readyz: a dependency outage must not restart it)", o.where())
		}
		if find(objs, "Service", name) == nil || find(objs, "Service", name+"-pods") == nil {
			errs.Addf("%s: needs Services %s and %s-pods (Prometheus' discovery)", o.where(), name, name)
		}
	}
	var invs []Invocation
	for _, o := range objs {
		var spec *corev1.PodSpec
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			spec = &v.Spec.Template.Spec
		case *batchv1.CronJob:
			spec = &v.Spec.JobTemplate.Spec.Template.Spec
		default:
			continue
		}
		for _, c := range spec.Containers {
			image, _, _ := strings.Cut(c.Image, ":")
			target, ok := strings.CutPrefix(image, "flashsale/")
			if !ok || len(c.Command) > 0 {
				continue // not a service image, or a shell (recovery-toolbox)
			}
			env := map[string]bool{}
			values := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = true
				values[e.Name] = e.Value
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					values[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Key
				}
			}
			var args []string
			for _, a := range c.Args {
				args = append(args, envRef.ReplaceAllStringFunc(a, func(ref string) string { return values[ref[2:len(ref)-1]] }))
			}
			inv := Invocation{Where: o.where(), Binary: ServiceTargets[target].Binary, Args: args, Env: env, EnvValue: literal(values)}
			invs = append(invs, inv)
			CheckInvocation(inv, k8sWant, errs, func(s string) { t.Log(s) })
		}
	}
	invs = append(invs, toolboxInvocations(errs, objs)...)
	CheckIPv6PrefixAgree(invs, errs)
	if extra, missing := diff(k8sShardHosts(objs), k8sWant.ShardHosts); len(extra)+len(missing) > 0 {
		errs.Addf("the manifests' Redis servers differ from the shards the --redis-allow rule knows: more %v, fewer %v", extra, missing)
	}

	// Redis: 16 shards, each a master and replicas, the master reachable by its Service.
	for i := 0; i < Shards; i++ {
		name := fmt.Sprintf("redis-shard-%d", i)
		ss := find(objs, "StatefulSet", name)
		if ss == nil {
			errs.Addf("no StatefulSet %s", name)
			continue
		}
		if r := deref(ss.obj.(*appsv1.StatefulSet).Spec.Replicas, 1); r < 2 {
			errs.Addf("%s: %d pods; a shard needs a master and at least one replica", ss.where(), r)
		}
		m := find(objs, "Service", name+"-master")
		if m == nil || m.obj.(*corev1.Service).Spec.Selector["statefulset.kubernetes.io/pod-name"] != name+"-0" {
			errs.Addf("Service %s-master must select pod %s-0", name, name)
		}
		if args := strings.Join(ss.obj.(*appsv1.StatefulSet).Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--maxmemory-policy noeviction") {
			errs.Addf("%s: Redis must never evict (--maxmemory-policy noeviction)", ss.where())
		}
	}

	// Kafka: 3 KRaft nodes, RF 3, min.insync.replicas 2; the topics Job.
	if k := find(objs, "StatefulSet", "kafka"); k == nil {
		errs.Addf("no StatefulSet kafka")
	} else {
		ss := k.obj.(*appsv1.StatefulSet)
		if deref(ss.Spec.Replicas, 1) != 3 {
			errs.Addf("%s: want 3 nodes", k.where())
		}
		env := containerEnv(ss.Spec.Template.Spec.Containers[0].Env)
		for key, want := range map[string]string{
			"KAFKA_DEFAULT_REPLICATION_FACTOR": "3", "KAFKA_MIN_INSYNC_REPLICAS": "2",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "3", "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
			"KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE": "false",
		} {
			if env[key] != want {
				errs.Addf("%s: %s=%q, want %q", k.where(), key, env[key], want)
			}
		}
		if !strings.Contains(env["KAFKA_PROCESS_ROLES"], "controller") || len(strings.Split(env["KAFKA_CONTROLLER_QUORUM_VOTERS"], ",")) != 3 {
			errs.Addf("%s: must run KRaft with a 3-voter quorum", k.where())
		}
	}
	if j := find(objs, "Job", "kafka-topics"); j == nil {
		errs.Addf("no Job kafka-topics")
	} else {
		checkTopicInit(errs, j.where(), strings.Join(j.obj.(*batchv1.Job).Spec.Template.Spec.Containers[0].Args, " "))
	}

	// recovery: verify on a schedule; rebuild as a suspended template.
	if v := find(objs, "CronJob", "recovery-verify"); v == nil || v.obj.(*batchv1.CronJob).Spec.Suspend != nil && *v.obj.(*batchv1.CronJob).Spec.Suspend {
		errs.Addf("CronJob recovery-verify must exist and run on its schedule")
	}
	if r := find(objs, "CronJob", "recovery-rebuild"); r == nil || r.obj.(*batchv1.CronJob).Spec.Suspend == nil || !*r.obj.(*batchv1.CronJob).Spec.Suspend {
		errs.Addf("CronJob recovery-rebuild must exist and be suspended (a template for kubectl create job --from)")
	}

	// The record kept in bounds: recovery archive every night.
	if a := find(objs, "CronJob", "recovery-archive"); a == nil || a.obj.(*batchv1.CronJob).Spec.Suspend != nil && *a.obj.(*batchv1.CronJob).Spec.Suspend {
		errs.Addf("CronJob recovery-archive must exist and run on its schedule (deploy/RUNBOOK.md, \"Keeping the record in bounds\")")
	}
	// Every CronJob runs one Job at a time, within a deadline, and keeps a short history.
	for _, o := range objs {
		if cj, ok := o.obj.(*batchv1.CronJob); ok {
			for _, p := range CheckCronJob(cj) {
				errs.Addf("%s: %s", o.where(), p)
			}
		}
	}

	// The same images as the compose file.
	if p, err := loadCompose(t, composeEnv(t), "*"); err != nil {
		errs.Addf("compose: %v", err)
	} else {
		var composeImages []string
		for _, s := range p.Services {
			composeImages = append(composeImages, s.Image)
		}
		for _, o := range objs {
			for _, c := range podContainers(o) {
				if !strings.HasPrefix(c.Image, "flashsale/") && !slices.Contains(composeImages, c.Image) {
					errs.Addf("%s: image %s is not the compose file's (%v)", o.where(), c.Image, composeImages)
				}
			}
		}
	}

	// Every Secret key is in the runbook's kubectl create secret line.
	runbook, _ := os.ReadFile(Path("deploy", "RUNBOOK.md"))
	for _, k := range SecretKeys {
		if !strings.Contains(string(runbook), "--from-literal="+k+"=") {
			errs.Addf("deploy/RUNBOOK.md must show how to set Secret key %s (--from-literal=%s=...)", k, k)
		}
	}

	// Prometheus' DNS discovery names headless Services that publish not-ready pods.
	var promCfg struct {
		ScrapeConfigs []struct {
			JobName      string `yaml:"job_name"`
			DNSSDConfigs []struct {
				Names []string `yaml:"names"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	data, _ := os.ReadFile(Path(PromConfigK8s))
	if err := yaml.Unmarshal(data, &promCfg); err != nil {
		errs.Addf("%s: %v", PromConfigK8s, err)
	}
	for _, sc := range promCfg.ScrapeConfigs {
		for _, sd := range sc.DNSSDConfigs {
			for _, n := range sd.Names {
				svcName, ok := strings.CutSuffix(n, "."+k8sgen.Namespace+".svc.cluster.local")
				s := find(objs, "Service", svcName)
				if !ok || s == nil || s.obj.(*corev1.Service).Spec.ClusterIP != "None" || !s.obj.(*corev1.Service).Spec.PublishNotReadyAddresses {
					errs.Addf("%s job %s: %s is not a headless Service publishing not-ready pods", PromConfigK8s, sc.JobName, n)
					continue
				}
				if ports := s.obj.(*corev1.Service).Spec.Ports; len(ports) == 0 || int(ports[0].Port) != sd.Port {
					errs.Addf("%s job %s: port %d is not Service %s's", PromConfigK8s, sc.JobName, sd.Port, svcName)
				}
			}
		}
	}

	// Prometheus and Grafana mount their ConfigMaps where their configs say.
	mounts := func(name string) map[string]string {
		out := map[string]string{}
		o := find(objs, "Deployment", name)
		if o == nil {
			errs.Addf("no Deployment %s", name)
			return out
		}
		spec := o.obj.(*appsv1.Deployment).Spec.Template.Spec
		cms := map[string]string{}
		for _, v := range spec.Volumes {
			if v.ConfigMap != nil {
				cms[v.Name] = v.ConfigMap.Name
			}
		}
		for _, m := range spec.Containers[0].VolumeMounts {
			out[m.MountPath] = cms[m.Name]
		}
		return out
	}
	gm := mounts("grafana")
	if path := dashboardProviderPath(errs); gm[path] != "grafana-dashboards" {
		errs.Addf("grafana: ConfigMap grafana-dashboards must be mounted at %s (the provider's path)", path)
	}
	if gm["/etc/grafana/provisioning/datasources"] != "grafana-datasources" || gm["/etc/grafana/provisioning/dashboards"] != "grafana-dashboard-providers" {
		errs.Addf("grafana: provisioning ConfigMaps mounted elsewhere than /etc/grafana/provisioning/{datasources,dashboards}")
	}
	pm := mounts("prometheus")
	if pm["/etc/prometheus/prometheus.yml"] != "prometheus-config" || pm["/etc/prometheus/rules"] != "prometheus-rules" {
		errs.Addf("prometheus: config must be at /etc/prometheus/prometheus.yml and rules under /etc/prometheus/rules (rules/*.yml relative to the config)")
	}
}

func podContainers(o object) []corev1.Container {
	switch v := o.obj.(type) {
	case *appsv1.Deployment:
		return v.Spec.Template.Spec.Containers
	case *appsv1.StatefulSet:
		return v.Spec.Template.Spec.Containers
	case *batchv1.Job:
		return v.Spec.Template.Spec.Containers
	case *batchv1.CronJob:
		return v.Spec.JobTemplate.Spec.Template.Spec.Containers
	}
	return nil
}

// literal is values without those from a Secret.
func literal(values map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range values {
		if !strings.HasPrefix(v, "secret:") {
			out[k] = v
		}
	}
	return out
}

// toolboxInvocations are the recovery commands on-call runs in the toolbox with its
// $CONN flags: they reach Redis as the services do, so the same allowlist holds, and
// the rebuild counts IPv6 buyers as grab-service does.
func toolboxInvocations(errs *Errs, objs []object) []Invocation {
	o := find(objs, "Deployment", "recovery-toolbox")
	if o == nil {
		return nil
	}
	var conn string
	for _, e := range o.obj.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Env {
		if e.Name == "CONN" {
			conn = e.Value
		}
	}
	args := strings.Fields(conn)
	if !slices.Contains(args, "--redis") {
		errs.Addf("%s: $CONN has no --redis", o.where())
		return nil
	}
	inv := Invocation{Where: o.where() + " $CONN", Binary: "recovery", Args: append([]string{"rebuild"}, args...)}
	flags, _ := inv.Flags(map[string]bool{"mysql-migrate": true})
	if v, ok := flags["redis-allow"]; !ok {
		errs.Addf("%s: runs without --redis-allow: the shards' own servers are the only ones on-call's shardAddrs may name", inv.Where)
	} else {
		for _, p := range CheckRedisAllow(v, k8sWant) {
			errs.Addf("%s: --redis-allow %q: %s", inv.Where, v, p)
		}
	}
	return []Invocation{inv}
}

// k8sShardHosts are the hosts of the manifests' Redis servers (not the sentinels):
// each Service selecting their pods, and each pod by its StatefulSet's Service.
func k8sShardHosts(objs []object) []string {
	var out []string
	fqdn := func(h string) []string { return []string{h, h + "." + k8sgen.Namespace + ".svc.cluster.local"} }
	var pods []map[string]string
	for _, o := range objs {
		ss, ok := o.obj.(*appsv1.StatefulSet)
		if !ok {
			continue
		}
		c := ss.Spec.Template.Spec.Containers[0]
		if !strings.HasPrefix(c.Image, "redis:") || !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == 6379 }) {
			continue // not Redis, or a sentinel
		}
		pods = append(pods, ss.Spec.Template.Labels)
		for k := range deref(ss.Spec.Replicas, 1) {
			out = append(out, fqdn(fmt.Sprintf("%s-%d.%s", ss.Name, k, ss.Spec.ServiceName))...)
		}
	}
	for _, o := range objs {
		svc, ok := o.obj.(*corev1.Service)
		if !ok || len(svc.Spec.Selector) == 0 {
			continue
		}
		if slices.ContainsFunc(pods, func(l map[string]string) bool {
			for k, v := range svc.Spec.Selector {
				if k != "statefulset.kubernetes.io/pod-name" && l[k] != v {
					return false
				}
			}
			return true
		}) {
			out = append(out, fqdn(svc.Name)...)
		}
	}
	return out
}
