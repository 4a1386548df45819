package validate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// IngressNamespace is the namespace of the ingress controller (ingress-nginx, class
// nginx, deploy/k8s/45-ingress.yaml): the one source admitted to the API ports.
const (
	IngressNamespace = "ingress-nginx"
	IngressClass     = "nginx"
)

// nsLabel names a namespace in a namespaceSelector.
const nsLabel = "kubernetes.io/metadata.name"

// DNSNeeds are what every pod may reach: kube-dns, over UDP and TCP.
var DNSNeeds = []string{"kube-system/kube-dns:53/UDP", "kube-system/kube-dns:53/TCP"}

var serviceNeeds = []string{"redis:6379/TCP", "redis-sentinel:26379/TCP", "kafka:9092/TCP", "mysql:3306/TCP", "nacos:8848/TCP", "nacos:9848/TCP"}

// EgressNeeds is every destination each pod (by its app.kubernetes.io/name) connects
// to, DNS aside: a pod of the namespace by name, "namespace/name" for another
// namespace's pods, "cidr:..." for addresses outside; then port/protocol. The
// NetworkPolicies must allow each pod exactly these.
var EgressNeeds = map[string][]string{
	"grab-service":     serviceNeeds,
	"promo-admin":      serviceNeeds,
	"flow-sink":        serviceNeeds, // the healer too: the shards and the sentinels
	"recovery-verify":  serviceNeeds,
	"recovery-rebuild": serviceNeeds,
	"recovery-toolbox": slices.Concat(serviceNeeds, []string{"promo-admin:8081/TCP"}), // configctl's changes go through promo-admin's API
	"mysql-migrate":    {"mysql:3306/TCP"},
	"recovery-archive": {"mysql:3306/TCP"},                             // the record only: no shard, no broker, no switches
	"redis":            {"redis:6379/TCP", "redis-sentinel:26379/TCP"}, // a replica's master; which master (at start)
	"redis-sentinel":   {"redis:6379/TCP", "redis-sentinel:26379/TCP"}, // the watched shards; the peers
	"kafka":            {"kafka:9092/TCP", "kafka:9093/TCP"},           // replication; the KRaft quorum
	"kafka-topics":     {"kafka:9092/TCP"},
	"kafka-exporter":   {"kafka:9092/TCP"},
	"mysqld-exporter":  {"mysql:3306/TCP"},
	"redis-exporter":   {"redis:6379/TCP"},
	"nacos-seed":       {"nacos:8848/TCP"},
	"mysql":            nil, // calls no one
	"nacos":            nil, // standalone: no peer, its store is local
	"prometheus": {"grab-service:9180/TCP", "promo-admin:9181/TCP", "flow-sink:9182/TCP", "redis-exporter:9121/TCP",
		"kafka-exporter:9308/TCP", "mysqld-exporter:9104/TCP", "alertmanager:9093/TCP", "kube-system/kube-state-metrics:8080/TCP"},
	"grafana":      {"prometheus:9090/TCP"},
	"alertmanager": {"cidr:0.0.0.0/0:443/TCP"},
}

// WorldEgress are the pods allowed an address block (outside the cluster), and why.
var WorldEgress = map[string]string{
	"alertmanager": "on-call's paging webhook (Secret key alert-webhook-url) is on the internet, HTTPS",
}

// Pod is one workload's pods: its app.kubernetes.io/name and its template's labels.
type Pod struct {
	Name   string
	Labels map[string]string
}

func selects(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

// CheckDefaultDeny: a policy selects every pod of the namespace for both ingress and
// egress and allows nothing, so whatever no other policy opens is refused.
func CheckDefaultDeny(policies []*networkingv1.NetworkPolicy) []string {
	for _, np := range policies {
		s := np.Spec
		if len(s.PodSelector.MatchLabels) == 0 && len(s.PodSelector.MatchExpressions) == 0 &&
			slices.Contains(s.PolicyTypes, networkingv1.PolicyTypeIngress) && slices.Contains(s.PolicyTypes, networkingv1.PolicyTypeEgress) &&
			len(s.Ingress) == 0 && len(s.Egress) == 0 {
			return nil
		}
	}
	return []string{"no default-deny NetworkPolicy (podSelector {}, policyTypes [Ingress, Egress], no rule)"}
}

// egressPorts are a rule's ports as "port/protocol"; "*" for every port.
func egressPorts(ports []networkingv1.NetworkPolicyPort) []string {
	if len(ports) == 0 {
		return []string{"*"}
	}
	var out []string
	for _, p := range ports {
		proto := "TCP"
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		port := "*"
		if p.Port != nil {
			port = p.Port.String()
			if p.EndPort != nil {
				port += fmt.Sprintf("-%d", *p.EndPort)
			}
		}
		out = append(out, port+"/"+proto)
	}
	return out
}

// egressPeer names the destinations one peer of a rule allows.
func egressPeer(peer networkingv1.NetworkPolicyPeer, pods []Pod) ([]string, string) {
	switch {
	case peer.IPBlock != nil:
		return []string{"cidr:" + peer.IPBlock.CIDR}, ""
	case peer.NamespaceSelector != nil:
		ns := peer.NamespaceSelector.MatchLabels[nsLabel]
		if ns == "" || len(peer.NamespaceSelector.MatchLabels) != 1 || len(peer.NamespaceSelector.MatchExpressions) > 0 {
			return nil, "a namespaceSelector that is not one namespace by name"
		}
		if peer.PodSelector == nil || len(peer.PodSelector.MatchLabels) != 1 || len(peer.PodSelector.MatchExpressions) > 0 {
			return []string{ns + "/*"}, ""
		}
		for _, v := range peer.PodSelector.MatchLabels {
			return []string{ns + "/" + v}, ""
		}
	}
	var out []string
	for _, p := range pods {
		if selects(peer.PodSelector, p.Labels) && !slices.Contains(out, p.Name) {
			out = append(out, p.Name)
		}
	}
	if len(out) == 0 {
		return nil, "a podSelector that selects no pod the manifests run"
	}
	return out, ""
}

// Egress is what the policies let one pod reach ("destination:port/protocol"), and
// the problems found on the way: a rule open to every destination, a peer that is not
// one namespace or selects nothing.
func Egress(policies []*networkingv1.NetworkPolicy, pod Pod, pods []Pod) (reach, problems []string) {
	for _, np := range policies {
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || !selects(&np.Spec.PodSelector, pod.Labels) {
			continue
		}
		for i, rule := range np.Spec.Egress {
			if len(rule.To) == 0 {
				problems = append(problems, fmt.Sprintf("NetworkPolicy %s egress rule %d has no `to`: every destination", np.Name, i+1))
				continue
			}
			for _, peer := range rule.To {
				dests, bad := egressPeer(peer, pods)
				if bad != "" {
					problems = append(problems, fmt.Sprintf("NetworkPolicy %s egress rule %d: %s", np.Name, i+1, bad))
				}
				if peer.IPBlock != nil && WorldEgress[pod.Name] == "" {
					problems = append(problems, fmt.Sprintf("NetworkPolicy %s lets %s reach addresses %s; only %v may leave the cluster", np.Name, pod.Name, peer.IPBlock.CIDR, keys(WorldEgress)))
				}
				for _, d := range dests {
					for _, p := range egressPorts(rule.Ports) {
						if r := d + ":" + p; !slices.Contains(reach, r) {
							reach = append(reach, r)
						}
					}
				}
			}
		}
	}
	sort.Strings(reach)
	return reach, problems
}

// CheckEgress: every pod may reach exactly DNS and what needs lists for it, no more
// (a wider rule) and no less (a broken dependency).
func CheckEgress(policies []*networkingv1.NetworkPolicy, pods []Pod, needs map[string][]string) []string {
	var out []string
	for _, pod := range pods {
		want, ok := needs[pod.Name]
		if !ok {
			out = append(out, fmt.Sprintf("%s: no egress needs listed (EgressNeeds in deploy/validate/netpol.go)", pod.Name))
			continue
		}
		want = append(slices.Clone(DNSNeeds), want...)
		reach, problems := Egress(policies, pod, pods)
		for _, p := range problems {
			out = append(out, pod.Name+": "+p)
		}
		for _, r := range reach {
			if !slices.Contains(want, r) {
				out = append(out, fmt.Sprintf("%s: egress to %s, which it does not need", pod.Name, r))
			}
		}
		for _, w := range want {
			if !slices.Contains(reach, w) {
				out = append(out, fmt.Sprintf("%s: needs %s, which no egress rule allows", pod.Name, w))
			}
		}
	}
	return out
}

// CheckAPIIngress checks who may reach a service's API port: routed (an Ingress sends
// it traffic), the ingress controller's namespace and, by label, pods of the namespace
// that need it (CheckIngressMatchesEgress holds those to EgressNeeds); not routed, no one.
func CheckAPIIngress(policies []*networkingv1.NetworkPolicy, podLabels map[string]string, apiPort int, routed bool) []string {
	var out []string
	open := false
	for _, np := range policies {
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !selects(&np.Spec.PodSelector, podLabels) {
			continue
		}
		for i, rule := range np.Spec.Ingress {
			covers := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				covers = covers || p.Port == nil || p.Port.IntValue() == apiPort || p.Port.StrVal == "http"
			}
			if !covers {
				continue
			}
			if !routed {
				out = append(out, fmt.Sprintf("NetworkPolicy %s rule %d admits clients to API port %d, which no Ingress routes", np.Name, i+1, apiPort))
				continue
			}
			onlyController, ownPods := len(rule.From) > 0, true
			for _, peer := range rule.From {
				ns := peer.NamespaceSelector
				controller := peer.IPBlock == nil && ns != nil && len(ns.MatchExpressions) == 0 &&
					len(ns.MatchLabels) == 1 && ns.MatchLabels[nsLabel] == IngressNamespace
				onlyController = onlyController && controller
				ownPods = ownPods && ownPodPeer(peer)
			}
			switch {
			case onlyController:
				open = true
			case len(rule.From) > 0 && ownPods:
				// Pods of the namespace (on-call's toolbox): CheckIngressMatchesEgress
				// holds them to the pods whose EgressNeeds name the port.
			default:
				out = append(out, fmt.Sprintf("NetworkPolicy %s rule %d admits more than namespace %s and the namespace's pods that need it to API port %d", np.Name, i+1, IngressNamespace, apiPort))
			}
		}
	}
	if routed && !open {
		out = append(out, fmt.Sprintf("no NetworkPolicy admits the ingress controller (namespace %s) to API port %d", IngressNamespace, apiPort))
	}
	return out
}

// ownPodPeer: a peer naming some pods of the policy's own namespace by label, not
// every pod, another namespace or an address block.
func ownPodPeer(peer networkingv1.NetworkPolicyPeer) bool {
	sel := peer.PodSelector
	return peer.IPBlock == nil && peer.NamespaceSelector == nil && sel != nil &&
		(len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Admits: some ingress rule of the policies selecting dst lets src's pods in on port
// ("number/protocol").
func Admits(policies []*networkingv1.NetworkPolicy, dst, src Pod, port string) bool {
	for _, np := range policies {
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !selects(&np.Spec.PodSelector, dst.Labels) {
			continue
		}
		for _, rule := range np.Spec.Ingress {
			ports := egressPorts(rule.Ports)
			if !slices.Contains(ports, port) && !slices.Contains(ports, "*") {
				continue
			}
			if len(rule.From) == 0 {
				return true
			}
			for _, peer := range rule.From {
				if peer.IPBlock == nil && peer.NamespaceSelector == nil && selects(peer.PodSelector, src.Labels) {
					return true
				}
			}
		}
	}
	return false
}

// CheckIngressMatchesEgress: with both directions denied by default, a connection
// needs the destination's ingress too. Every need of a pod to another pod of the
// namespace is admitted there, and an ingress rule naming a pod of the namespace
// names one that needs the destination.
func CheckIngressMatchesEgress(policies []*networkingv1.NetworkPolicy, pods []Pod, needs map[string][]string) []string {
	var out []string
	byName := map[string]Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	for _, src := range pods {
		for _, n := range needs[src.Name] {
			dst, port, _ := strings.Cut(n, ":")
			if d, ok := byName[dst]; ok && !Admits(policies, d, src, port) {
				out = append(out, fmt.Sprintf("%s needs %s, which no ingress rule of %s admits", src.Name, n, dst))
			}
		}
	}
	for _, np := range policies {
		for i, rule := range np.Spec.Ingress {
			for _, peer := range rule.From {
				if peer.PodSelector == nil || peer.NamespaceSelector != nil {
					continue
				}
				for _, src := range pods {
					if !selects(peer.PodSelector, src.Labels) {
						continue
					}
					for _, dst := range pods {
						needed := slices.ContainsFunc(needs[src.Name], func(n string) bool { return strings.HasPrefix(n, dst.Name+":") })
						if selects(&np.Spec.PodSelector, dst.Labels) && !needed {
							out = append(out, fmt.Sprintf("NetworkPolicy %s ingress rule %d admits %s to %s, which it does not need", np.Name, i+1, src.Name, dst.Name))
						}
					}
				}
			}
		}
	}
	return out
}
