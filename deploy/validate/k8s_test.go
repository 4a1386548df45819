package validate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/flashsale/platform/deploy/validate/k8sgen"
)

const K8sDir = "deploy/k8s"

// SecretKeys are the keys of Secret flashsale-secrets, which is created by hand
// (deploy/RUNBOOK.md) and never committed.
var SecretKeys = []string{"checkout-token", "admin-token", "viewer-token", "mysql-dsn", "mysql-root-password", "mysql-password", "grafana-admin-password",
	"mysql-migrate-password", "mysql-grab-password", "mysql-admin-password", "mysql-sink-password", "mysql-recovery-password",
	"redis-password", "redis-grab-password", "redis-admin-password", "redis-recovery-password", "alert-webhook-url",
	"redis-exporter-password", "mysql-exporter-password",
	"kafka-broker-password", "kafka-grab-password", "kafka-promo-admin-password", "kafka-flow-sink-password", "kafka-recovery-password",
	"kafka-exporter-password", "kafka-keystore-password",
	"nacos-auth-token", "nacos-identity-key", "nacos-identity-value", "nacos-admin-password", "nacos-password", "nacos-configctl-password", "nacos-promo-admin-password", "oncall-token",
	"approver-token"}

var k8sWant = Expected{
	Redis: func() []string {
		out := make([]string, Shards)
		for i := range out {
			out[i] = k8sgen.MasterAddr(i)
		}
		return out
	}(),
	Sentinels: k8sgen.SentinelAddrs(),
	Kafka:     []string{"kafka-0.kafka-headless:9092", "kafka-1.kafka-headless:9092", "kafka-2.kafka-headless:9092"},
	Nacos:     "nacos:8848",
	// Each shard's Services (the pods' headless one, the master's) and its pods, by
	// the short names and the cluster's.
	ShardHosts: func() []string {
		var out []string
		fqdn := func(h string) []string { return []string{h, h + "." + k8sgen.Namespace + ".svc.cluster.local"} }
		for i := range Shards {
			name := fmt.Sprintf("redis-shard-%d", i)
			out = append(out, fqdn(name)...)
			out = append(out, fqdn(name+"-master")...)
			for k := range 1 + k8sgen.RedisReplicas {
				out = append(out, fqdn(fmt.Sprintf("%s-%d.%s", name, k, name))...)
			}
		}
		return out
	}(),
	ShardPrefixes: []string{"redis-shard-"},
}

// object is one decoded manifest.
type object struct {
	file string
	kind string
	meta *metav1.ObjectMeta
	obj  any
}

func (o object) where() string { return fmt.Sprintf("%s %s/%s", o.file, o.kind, o.meta.Name) }

// newTyped is the Kubernetes API type of each kind the manifests may hold.
func newTyped(apiVersion, kind string) (any, *metav1.ObjectMeta) {
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		o := &corev1.Namespace{}
		return o, &o.ObjectMeta
	case "v1 Service":
		o := &corev1.Service{}
		return o, &o.ObjectMeta
	case "v1 ConfigMap":
		o := &corev1.ConfigMap{}
		return o, &o.ObjectMeta
	case "apps/v1 Deployment":
		o := &appsv1.Deployment{}
		return o, &o.ObjectMeta
	case "apps/v1 StatefulSet":
		o := &appsv1.StatefulSet{}
		return o, &o.ObjectMeta
	case "batch/v1 Job":
		o := &batchv1.Job{}
		return o, &o.ObjectMeta
	case "batch/v1 CronJob":
		o := &batchv1.CronJob{}
		return o, &o.ObjectMeta
	case "networking.k8s.io/v1 NetworkPolicy":
		o := &networkingv1.NetworkPolicy{}
		return o, &o.ObjectMeta
	case "networking.k8s.io/v1 Ingress":
		o := &networkingv1.Ingress{}
		return o, &o.ObjectMeta
	case "policy/v1 PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		return o, &o.ObjectMeta
	}
	return nil, nil
}

type kustomization struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Resources  []string         `json:"resources"`
	Images     []KustomizeImage `json:"images"`
}

func loadKustomization(t *testing.T) kustomization {
	data, err := os.ReadFile(Path(K8sDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	return k
}

// loadManifests strictly decodes every document of every file kustomization.yaml
// lists into its Kubernetes API type: an unknown field, a wrong type or an unknown
// kind fails.
func loadManifests(t *testing.T) []object {
	k := loadKustomization(t)
	var out []object
	for _, f := range k.Resources {
		data, err := os.ReadFile(Path(K8sDir, f))
		if err != nil {
			t.Fatal(err)
		}
		docs, err := YAMLDocs(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, doc := range docs {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s document %d: %v", f, i+1, err)
			}
			obj, meta := newTyped(tm.APIVersion, tm.Kind)
			if obj == nil {
				t.Errorf("%s document %d: %s %s is not a kind these manifests use", f, i+1, tm.APIVersion, tm.Kind)
				continue
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Errorf("%s document %d (%s): %v", f, i+1, tm.Kind, err)
				continue
			}
			out = append(out, object{file: f, kind: tm.Kind, meta: meta, obj: obj})
		}
	}
	return out
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	k := loadKustomization(t)
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml: %s %s", k.APIVersion, k.Kind)
	}
	files, err := filepath.Glob(Path(K8sDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			have = append(have, b)
		}
	}
	if !slices.Equal(have, k.Resources) {
		t.Errorf("kustomization.yaml resources %v, the folder has %v (in name order)", k.Resources, have)
	}
	for _, img := range k.Images {
		if _, ok := ServiceTargets[strings.TrimPrefix(img.Name, "flashsale/")]; !ok || img.NewTag == "" && img.Digest == "" {
			t.Errorf("kustomization.yaml image %+v: want a service image with a tag", img)
		}
	}
}

func TestGeneratedManifestsUpToDate(t *testing.T) {
	files, err := k8sgen.Files(Root())
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		have, err := os.ReadFile(Path(path))
		if err != nil || !bytes.Equal(have, want) {
			t.Errorf("%s is not what k8sgen makes (err %v): run `cd deploy/validate && GOWORK=off go run ./cmd/k8sgen`", path, err)
		}
	}
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func TestKubernetesManifests(t *testing.T) {
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	var errs Errs
	byKind := map[string][]object{}
	names := map[string]bool{}
	for _, o := range objs {
		byKind[o.kind] = append(byKind[o.kind], o)
		key := o.kind + "/" + o.meta.Name
		if names[key] {
			errs.Addf("%s: defined twice", o.where())
		}
		names[key] = true
		checkMeta(&errs, o)
	}
	type workload struct {
		o        object
		replicas int32
		selector *metav1.LabelSelector
		pod      *corev1.PodTemplateSpec
	}
	var workloads []workload
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			workloads = append(workloads, workload{o, deref(v.Spec.Replicas, 1), v.Spec.Selector, &v.Spec.Template})
		case *appsv1.StatefulSet:
			workloads = append(workloads, workload{o, deref(v.Spec.Replicas, 1), v.Spec.Selector, &v.Spec.Template})
			svc := find(objs, "Service", v.Spec.ServiceName)
			if svc == nil || svc.obj.(*corev1.Service).Spec.ClusterIP != "None" {
				errs.Addf("%s: serviceName %s is not a headless Service", o.where(), v.Spec.ServiceName)
			}
		case *batchv1.Job:
			checkPod(&errs, o, &v.Spec.Template.Spec, objs)
		case *batchv1.CronJob:
			checkPod(&errs, o, &v.Spec.JobTemplate.Spec.Template.Spec, objs)
			if len(strings.Fields(v.Spec.Schedule)) != 5 {
				errs.Addf("%s: schedule %q is not a 5-field cron line", o.where(), v.Spec.Schedule)
			}
			if v.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
				errs.Addf("%s: two runs at once must be forbidden", o.where())
			}
		}
	}
	for _, w := range workloads {
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(w.pod.Labels)) {
			errs.Addf("%s: selector %v does not select its own pod template (%v)", w.o.where(), w.selector, w.pod.Labels)
		}
		checkPod(&errs, w.o, &w.pod.Spec, objs)
		// Several replicas: a PodDisruptionBudget keeps a drain from taking them all.
		if w.replicas > 1 {
			covered := false
			for _, p := range byKind["PodDisruptionBudget"] {
				pdb := p.obj.(*policyv1.PodDisruptionBudget)
				if s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && !s.Empty() && s.Matches(labels.Set(w.pod.Labels)) {
					covered = true
				}
			}
			if !covered {
				errs.Addf("%s: %d replicas and no PodDisruptionBudget", w.o.where(), w.replicas)
			}
		}
	}
	for _, p := range byKind["PodDisruptionBudget"] {
		pdb := p.obj.(*policyv1.PodDisruptionBudget)
		s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		matched := false
		for _, w := range workloads {
			matched = matched || err == nil && s.Matches(labels.Set(w.pod.Labels))
		}
		if !matched || (pdb.Spec.MaxUnavailable == nil) == (pdb.Spec.MinAvailable == nil) {
			errs.Addf("%s: must select a workload and set one of maxUnavailable, minAvailable", p.where())
		}
	}
	for _, o := range byKind["Service"] {
		svc := o.obj.(*corev1.Service)
		s := labels.SelectorFromSet(svc.Spec.Selector)
		var pods []*corev1.PodTemplateSpec
		for _, w := range workloads {
			// A pod-name selector picks one StatefulSet pod; the template lacks that label.
			set := labels.Set{}
			for k, v := range w.pod.Labels {
				set[k] = v
			}
			if name := svc.Spec.Selector["statefulset.kubernetes.io/pod-name"]; name != "" && strings.HasPrefix(name, w.o.meta.Name+"-") && w.o.kind == "StatefulSet" {
				set["statefulset.kubernetes.io/pod-name"] = name
			}
			if len(svc.Spec.Selector) > 0 && s.Matches(set) {
				pods = append(pods, w.pod)
			}
		}
		if len(pods) == 0 {
			errs.Addf("%s: selector %v matches no pod template", o.where(), svc.Spec.Selector)
		}
		for _, port := range svc.Spec.Ports {
			if port.TargetPort.StrVal == "" {
				continue
			}
			for _, pod := range pods {
				if !hasPort(&pod.Spec, port.TargetPort.StrVal) {
					errs.Addf("%s: targetPort %s is no container port of the pods it selects", o.where(), port.TargetPort.StrVal)
				}
			}
		}
	}
	checkPlatform(&errs, t, objs)
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func find(objs []object, kind, name string) *object {
	for i := range objs {
		if objs[i].kind == kind && objs[i].meta.Name == name {
			return &objs[i]
		}
	}
	return nil
}

func hasPort(spec *corev1.PodSpec, name string) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

func checkMeta(errs *Errs, o object) {
	var problems []string
	if o.kind == "Service" || o.kind == "Namespace" {
		problems = validation.IsDNS1035Label(o.meta.Name)
	} else {
		problems = validation.IsDNS1123Subdomain(o.meta.Name)
	}
	for _, p := range problems {
		errs.Addf("%s: name: %s", o.where(), p)
	}
	if o.kind != "Namespace" && o.meta.Namespace != k8sgen.Namespace {
		errs.Addf("%s: namespace %q, want %s", o.where(), o.meta.Namespace, k8sgen.Namespace)
	}
	for k, v := range o.meta.Labels {
		for _, p := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
			errs.Addf("%s: label %s=%s: %s", o.where(), k, v, p)
		}
	}
}

// checkPod: what the API server would refuse or a rollout would trip on.
func checkPod(errs *Errs, o object, spec *corev1.PodSpec, objs []object) {
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
		if v.ConfigMap != nil && find(objs, "ConfigMap", v.ConfigMap.Name) == nil {
			errs.Addf("%s: volume %s uses ConfigMap %s, which no manifest defines", o.where(), v.Name, v.ConfigMap.Name)
		}
	}
	var claims []string
	if ss, ok := o.obj.(*appsv1.StatefulSet); ok {
		for _, c := range ss.Spec.VolumeClaimTemplates {
			claims = append(claims, c.Name)
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		where := o.where() + " container " + c.Name
		for _, p := range validation.IsDNS1123Label(c.Name) {
			errs.Addf("%s: name: %s", where, p)
		}
		if !strings.Contains(c.Image, ":") || strings.HasSuffix(c.Image, ":latest") {
			errs.Addf("%s: image %q must be pinned", where, c.Image)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			errs.Addf("%s: cpu and memory requests are required", where)
		}
		if c.Resources.Limits.Memory().IsZero() {
			errs.Addf("%s: a memory limit is required", where)
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			for _, e := range validation.IsValidPortName(p.Name) {
				errs.Addf("%s: port %s: %s", where, p.Name, e)
			}
			ports[p.Name] = true
		}
		for name, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if pr == nil {
				continue
			}
			var port string
			switch {
			case pr.HTTPGet != nil:
				port = pr.HTTPGet.Port.StrVal
			case pr.TCPSocket != nil:
				port = pr.TCPSocket.Port.StrVal
			}
			if port != "" && !ports[port] {
				errs.Addf("%s: %s probe uses port %q, which the container does not name", where, name, port)
			}
		}
		defined := map[string]bool{}
		for _, e := range c.Env {
			if defined[e.Name] {
				errs.Addf("%s: env %s twice", where, e.Name)
			}
			for _, ref := range envRef.FindAllStringSubmatch(e.Value, -1) {
				if !defined[ref[1]] {
					errs.Addf("%s: env %s uses $(%s) before it is defined", where, e.Name, ref[1])
				}
			}
			defined[e.Name] = true
			if e.ValueFrom != nil {
				ref := e.ValueFrom.SecretKeyRef
				if ref == nil || ref.Name != "flashsale-secrets" || !slices.Contains(SecretKeys, ref.Key) {
					errs.Addf("%s: env %s must come from Secret flashsale-secrets, one of keys %v", where, e.Name, SecretKeys)
				}
			}
		}
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			for _, ref := range envRef.FindAllStringSubmatch(a, -1) {
				if !defined[ref[1]] {
					errs.Addf("%s: argument uses $(%s), which is not in its env", where, ref[1])
				}
			}
		}
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok && !slices.Contains(claims, m.Name) {
				errs.Addf("%s: mounts volume %s, which the pod does not have", where, m.Name)
			}
		}
		if c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem {
			// The services' Nacos client and Go's os.TempDir need a writable /tmp.
			if strings.HasPrefix(c.Image, "flashsale/") && !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" }) {
				errs.Addf("%s: read-only root filesystem without a writable /tmp", where)
			}
		}
	}
}

// Every backend (Redis, Kafka, MySQL, Nacos) is behind a NetworkPolicy that admits
// only named pods, each of which the manifests run, and the services that use the
// backend are among them.
func TestNetworkPoliciesFenceTheBackends(t *testing.T) {
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	podNames := map[string]bool{}
	for _, o := range objs {
		var tmpl *corev1.PodTemplateSpec
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			tmpl = &v.Spec.Template
		case *appsv1.StatefulSet:
			tmpl = &v.Spec.Template
		case *batchv1.Job:
			tmpl = &v.Spec.Template
		case *batchv1.CronJob:
			tmpl = &v.Spec.JobTemplate.Spec.Template
		}
		if tmpl != nil {
			podNames[tmpl.Labels["app.kubernetes.io/name"]] = true
		}
	}
	users := map[string][]string{ // backend -> the services that must reach it
		"redis":          {"grab-service", "promo-admin", "flow-sink", "recovery-rebuild", "redis-sentinel"},
		"redis-sentinel": {"grab-service", "promo-admin", "flow-sink", "recovery-rebuild", "redis"},
		"kafka":          {"grab-service", "promo-admin", "flow-sink"},
		"mysql":          {"grab-service", "promo-admin", "flow-sink", "recovery-rebuild"},
		"nacos":          {"grab-service", "promo-admin", "flow-sink"},
	}
	var errs Errs
	for backend, want := range users {
		var admitted []string
		for _, o := range objs {
			np, ok := o.obj.(*networkingv1.NetworkPolicy)
			if !ok || np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != backend {
				continue
			}
			for _, rule := range np.Spec.Ingress {
				for _, peer := range rule.From {
					if peer.PodSelector == nil || peer.NamespaceSelector != nil || peer.IPBlock != nil {
						errs.Addf("%s: a peer other than named pods of the namespace", o.where())
						continue
					}
					for _, e := range peer.PodSelector.MatchExpressions {
						admitted = append(admitted, e.Values...)
					}
				}
			}
		}
		if admitted == nil {
			errs.Addf("%s: no NetworkPolicy admits named pods only", backend)
		}
		for _, name := range admitted {
			if !podNames[name] {
				errs.Addf("%s: the NetworkPolicy admits %q, which no manifest runs", backend, name)
			}
		}
		for _, name := range want {
			if !slices.Contains(admitted, name) {
				errs.Addf("%s: %s uses it but its NetworkPolicy does not admit it", backend, name)
			}
		}
	}
	if err := errs.Err(); err != nil {
		t.Fatal(err)
	}
}
