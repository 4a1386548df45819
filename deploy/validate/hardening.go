package validate

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

var (
	digestRe  = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)
	versionRe = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)*([-+._][A-Za-z0-9]+)*$`)
)

// CheckImageRef: an image names its version. Pinned by digest (name[:tag]@sha256:...)
// is always right; otherwise it has a tag, never latest, and with versioned the tag
// is a version (7.4.6-alpine, v2.53.3), not a moving name (stable, dev).
func CheckImageRef(ref string, versioned bool) error {
	if digestRe.MatchString(ref) {
		return nil
	}
	name, tag := ref, ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name, tag = ref[:i], ref[i+1:]
	}
	switch {
	case name == "" || tag == "":
		return fmt.Errorf("image %q has no tag: it runs whatever latest is on the day", ref)
	case tag == "latest":
		return fmt.Errorf("image %q: latest is no version", ref)
	case versioned && !versionRe.MatchString(tag):
		return fmt.Errorf("image %q: tag %q is not a version", ref, tag)
	}
	return nil
}

// KafkaUsers are the SCRAM users the brokers create when they first format their logs:
// the brokers' own, and one per client.
var KafkaUsers = []string{"broker", "grab-service", "promo-admin", "flow-sink", "recovery", "kafka-exporter"}

// CheckKafkaBroker checks a broker's settings (its KAFKA_* environment, as the
// apache/kafka image reads it) and its start script: every listener but the KRaft
// controller's speaks one of the allowed SASL protocols, the controller listener is
// advertised to no client, SCRAM-SHA-512 is the one mechanism, the brokers replicate
// over a SASL listener, and the script creates every SCRAM user.
func CheckKafkaBroker(env map[string]string, script string, allowed []string) []string {
	var out []string
	protocols := map[string]string{}
	for _, kv := range strings.Split(env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"], ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), ":"); ok {
			protocols[k] = v
		}
	}
	controllers := strings.Split(env["KAFKA_CONTROLLER_LISTENER_NAMES"], ",")
	listenerNames := func(list string) []string {
		var names []string
		for _, l := range strings.Split(list, ",") {
			if name, _, ok := strings.Cut(strings.TrimSpace(l), "://"); ok {
				names = append(names, name)
			}
		}
		return names
	}
	protocol := func(name string) string {
		if p, ok := protocols[name]; ok {
			return p
		}
		return name // a listener named after its protocol (PLAINTEXT://...)
	}
	listeners := listenerNames(env["KAFKA_LISTENERS"])
	if len(listeners) == 0 {
		out = append(out, "KAFKA_LISTENERS names no listener")
	}
	for _, name := range listeners {
		if slices.Contains(controllers, name) {
			continue
		}
		if p := protocol(name); !slices.Contains(allowed, p) {
			out = append(out, fmt.Sprintf("listener %s speaks %s to clients; want one of %v", name, p, allowed))
		}
	}
	advertised := env["KAFKA_ADVERTISED_LISTENERS"]
	if m := regexp.MustCompile(`KAFKA_ADVERTISED_LISTENERS="([^"]+)"`).FindStringSubmatch(script); advertised == "" && m != nil {
		advertised = m[1]
	}
	if advertised == "" {
		out = append(out, "no KAFKA_ADVERTISED_LISTENERS")
	}
	for _, name := range listenerNames(advertised) {
		if slices.Contains(controllers, name) || !slices.Contains(allowed, protocol(name)) {
			out = append(out, fmt.Sprintf("advertised listener %s (%s) is not a SASL client listener", name, protocol(name)))
		}
	}
	if ib := env["KAFKA_INTER_BROKER_LISTENER_NAME"]; !slices.Contains(allowed, protocol(ib)) {
		out = append(out, fmt.Sprintf("inter-broker listener %q is not a SASL listener", ib))
	}
	if env["KAFKA_SASL_ENABLED_MECHANISMS"] != KafkaMechanism || env["KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL"] != KafkaMechanism {
		out = append(out, fmt.Sprintf("KAFKA_SASL_ENABLED_MECHANISMS and KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL must be %s", KafkaMechanism))
	}
	for _, u := range KafkaUsers {
		if !strings.Contains(script, "--add-scram") || !strings.Contains(script, KafkaMechanism+"=[name="+u+",") {
			out = append(out, fmt.Sprintf("the start script creates no SCRAM user %s (kafka-storage format --add-scram)", u))
		}
	}
	return out
}

// CheckOpsPolicy checks what the NetworkPolicies let reach a service's pods (podLabels):
// some policy selects them for ingress, every rule that opens the ops port admits
// Prometheus' pods alone, and a rule opens the API port.
func CheckOpsPolicy(policies []*networkingv1.NetworkPolicy, podLabels map[string]string, apiPort, opsPort int) []string {
	covers := func(rule networkingv1.NetworkPolicyIngressRule, port int, name string) bool {
		if len(rule.Ports) == 0 {
			return true
		}
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.IntValue() == port || p.Port.StrVal == name {
				return true
			}
		}
		return false
	}
	var out []string
	selected, opsOpen, apiOpen := false, false, false
	for _, np := range policies {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(podLabels)) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		selected = true
		for _, rule := range np.Spec.Ingress {
			if covers(rule, apiPort, "http") {
				apiOpen = true
			}
			if !covers(rule, opsPort, "ops") {
				continue
			}
			opsOpen = true
			onlyPrometheus := len(rule.From) > 0
			for _, peer := range rule.From {
				onlyPrometheus = onlyPrometheus && peer.IPBlock == nil && peer.NamespaceSelector == nil && peer.PodSelector != nil &&
					len(peer.PodSelector.MatchExpressions) == 0 && len(peer.PodSelector.MatchLabels) == 1 &&
					peer.PodSelector.MatchLabels["app.kubernetes.io/name"] == "prometheus"
			}
			if !onlyPrometheus {
				out = append(out, fmt.Sprintf("NetworkPolicy %s opens the ops port %d to more than Prometheus' pods", np.Name, opsPort))
			}
		}
	}
	if !selected {
		out = append(out, "no NetworkPolicy selects the pods: every port, the ops port too, is open to all")
	}
	if !opsOpen {
		out = append(out, fmt.Sprintf("no NetworkPolicy rule admits Prometheus to the ops port %d", opsPort))
	}
	if !apiOpen {
		out = append(out, fmt.Sprintf("no NetworkPolicy rule opens the API port %d to the clients", apiPort))
	}
	return out
}
