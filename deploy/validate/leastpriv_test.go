package validate

import (
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// The least-privilege rules of the Kubernetes manifests (issue "Least privilege", k8s):
// default-deny NetworkPolicies with egress rules, no service account tokens, a
// restricted securityContext everywhere, the toolbox scaled down, release images
// pinned by digest. The checks are in netpol.go and podsec.go; negative_test.go
// shows each refuses a broken manifest.

func policiesOf(objs []object) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, o := range objs {
		if np, ok := o.obj.(*networkingv1.NetworkPolicy); ok {
			out = append(out, np)
		}
	}
	return out
}

// podsOf are the manifests' workloads by app.kubernetes.io/name (the 16 shards are one).
func podsOf(objs []object) []Pod {
	var out []Pod
	for _, o := range objs {
		t := podTemplate(o)
		if t == nil {
			continue
		}
		name := t.Labels["app.kubernetes.io/name"]
		if !slices.ContainsFunc(out, func(p Pod) bool { return p.Name == name }) {
			out = append(out, Pod{Name: name, Labels: t.Labels})
		}
	}
	return out
}

// routedServices are the Services an Ingress sends traffic to.
func routedServices(objs []object) map[string]bool {
	out := map[string]bool{}
	for _, o := range objs {
		ing, ok := o.obj.(*networkingv1.Ingress)
		if !ok {
			continue
		}
		for _, r := range ing.Spec.Rules {
			if r.HTTP == nil {
				continue
			}
			for _, p := range r.HTTP.Paths {
				if p.Backend.Service != nil {
					out[p.Backend.Service.Name] = true
				}
			}
		}
	}
	return out
}

func TestNetworkPoliciesDenyByDefault(t *testing.T) {
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	policies, pods := policiesOf(objs), podsOf(objs)
	var errs Errs
	for _, p := range CheckDefaultDeny(policies) {
		errs.Addf("%s", p)
	}
	for _, p := range CheckEgress(policies, pods, EgressNeeds) {
		errs.Addf("%s", p)
	}
	for _, p := range CheckIngressMatchesEgress(policies, pods, EgressNeeds) {
		errs.Addf("%s", p)
	}
	for name := range EgressNeeds {
		if !slices.ContainsFunc(pods, func(p Pod) bool { return p.Name == name }) {
			errs.Addf("EgressNeeds lists %s, which no manifest runs", name)
		}
	}
	// The API ports: from the ingress controller's namespace where an Ingress routes
	// the service, from no one where none does.
	routed := routedServices(objs)
	for _, o := range objs {
		if ing, ok := o.obj.(*networkingv1.Ingress); ok && (ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != IngressClass) {
			errs.Addf("%s: ingressClassName must be %s (its controller runs in namespace %s, which the NetworkPolicies admit)", o.where(), IngressClass, IngressNamespace)
		}
	}
	for _, name := range serviceJobs {
		o := find(objs, "Deployment", name)
		if o == nil {
			errs.Addf("no Deployment %s", name)
			continue
		}
		pod := o.obj.(*appsv1.Deployment).Spec.Template
		api, _ := flagValue(pod.Spec.Containers[0].Args, "listen")
		for _, p := range CheckAPIIngress(policies, pod.Labels, int(mustAtoi(strings.TrimPrefix(api, ":"))), routed[name]) {
			errs.Addf("%s: %s", o.where(), p)
		}
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

func TestPodsRunWithLeastPrivilege(t *testing.T) {
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	var errs Errs
	used := map[string]bool{}
	for _, o := range objs {
		tmpl := podTemplate(o)
		if tmpl == nil {
			continue
		}
		for _, p := range CheckPodPrivilege(tmpl.Labels["app.kubernetes.io/name"], &tmpl.Spec, PrivilegeExceptions, used) {
			errs.Addf("%s: %s", o.where(), p)
		}
	}
	for key := range PrivilegeExceptions {
		if !used[key] {
			errs.Addf("PrivilegeExceptions lists %q, which the manifests no longer need: remove it", key)
		}
	}
	if o := find(objs, "Deployment", "recovery-toolbox"); o == nil {
		errs.Addf("no Deployment recovery-toolbox")
	} else {
		for _, p := range CheckScaledDown(o.obj.(*appsv1.Deployment)) {
			errs.Addf("%s: %s", o.where(), p)
		}
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

// A release (FLASHSALE_RELEASE=1) refuses a service image without its digest; a dev
// run checks the entries are there and any digest is well-formed.
func TestReleaseImagesArePinnedByDigest(t *testing.T) {
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	var refs []string
	for _, o := range objs {
		if tmpl := podTemplate(o); tmpl != nil {
			for _, c := range append(slices.Clone(tmpl.Spec.InitContainers), tmpl.Spec.Containers...) {
				refs = append(refs, c.Image)
			}
		}
	}
	release := os.Getenv("FLASHSALE_RELEASE") == "1"
	if !release {
		t.Log("not a release (FLASHSALE_RELEASE unset): digests of flashsale/* not required")
	}
	for _, p := range CheckReleaseImages(loadKustomization(t).Images, refs, release) {
		t.Errorf("deploy/k8s/kustomization.yaml: %s", p)
	}
}
