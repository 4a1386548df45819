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
// Prometheus' pods alone, and a rule opens the API port (apiPort 0: the service has no
// clients there; CheckAPIIngress says who they may be).
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
	if !apiOpen && apiPort != 0 {
		out = append(out, fmt.Sprintf("no NetworkPolicy rule opens the API port %d to the clients", apiPort))
	}
	return out
}

// KafkaAuthorizer is the KRaft brokers' ACL authorizer: a request no ACL allows is
// refused.
const KafkaAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// KafkaSuperUsers skip the ACLs: the brokers' own user (replication, the init job,
// on-call's CLI) and ANONYMOUS, the principal of the PLAINTEXT controller listener,
// which carries the brokers' KRaft requests. No client is one.
var KafkaSuperUsers = []string{"User:ANONYMOUS", "User:broker"}

// KafkaACL is one grant: User may do Operation on the resource of Type (topic, group
// or cluster) named Name (* is every one; the cluster has no name).
type KafkaACL struct{ User, Operation, Type, Name string }

func (a KafkaACL) String() string {
	return strings.TrimSpace(fmt.Sprintf("%s %s %s %s", a.User, a.Operation, a.Type, a.Name))
}

// KafkaACLs are what each client user needs and no more, from the requests it sends
// and the Kafka docs' table of the operations each request needs: a producer's
// Produce needs Write and its Metadata Describe on the topic; the flow sink's group
// member Fetch (Read on the topic), JoinGroup, SyncGroup, Heartbeat, LeaveGroup (Read
// on the group), OffsetCommit (Read on both), FindCoordinator and OffsetFetch
// (Describe on both, implied by Read); its lag meter and recovery's ListOffsets
// (Describe on the topic) and OffsetFetch; kafka_exporter Metadata and ListOffsets on
// every topic, ListGroups, DescribeGroups and OffsetFetch on every group.
var KafkaACLs = []KafkaACL{
	{"grab-service", "Write", "topic", "promo-grab-flow"},
	{"grab-service", "Describe", "topic", "promo-grab-flow"},
	{"grab-service", "Write", "topic", "promo-state"},
	{"grab-service", "Describe", "topic", "promo-state"},
	{"promo-admin", "Write", "topic", "promo-state"},
	{"promo-admin", "Describe", "topic", "promo-state"},
	{"flow-sink", "Read", "topic", "promo-grab-flow"},
	{"flow-sink", "Describe", "topic", "promo-grab-flow"},
	{"flow-sink", "Read", "group", "flashsale-flow-sink"},
	{"flow-sink", "Write", "topic", "promo-grab-flow-dlq"},
	{"flow-sink", "Describe", "topic", "promo-grab-flow-dlq"},
	{"recovery", "Describe", "topic", "promo-grab-flow"},
	{"recovery", "Describe", "group", "flashsale-flow-sink"},
	{"kafka-exporter", "Describe", "topic", "*"},
	{"kafka-exporter", "Describe", "group", "*"},
	{"kafka-exporter", "Describe", "cluster", ""},
}

// CheckKafkaAuthorizer checks a broker's KAFKA_* environment: the StandardAuthorizer
// runs, the super users are exactly KafkaSuperUsers, and a resource without ACLs is
// not open to everyone.
func CheckKafkaAuthorizer(env map[string]string) []string {
	var out []string
	if a := env["KAFKA_AUTHORIZER_CLASS_NAME"]; a != KafkaAuthorizer {
		out = append(out, fmt.Sprintf("KAFKA_AUTHORIZER_CLASS_NAME is %q; want %s: without it any authenticated user may use any topic", a, KafkaAuthorizer))
	}
	var supers []string
	for _, u := range strings.Split(env["KAFKA_SUPER_USERS"], ";") {
		if u = strings.TrimSpace(u); u != "" {
			supers = append(supers, u)
		}
	}
	slices.Sort(supers)
	if !slices.Equal(supers, KafkaSuperUsers) {
		out = append(out, fmt.Sprintf("KAFKA_SUPER_USERS is %q; want exactly %s", env["KAFKA_SUPER_USERS"], strings.Join(KafkaSuperUsers, ";")))
	}
	if v, ok := env["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"]; ok && !strings.EqualFold(strings.TrimSpace(v), "false") {
		out = append(out, fmt.Sprintf("KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND=%s opens every resource without ACLs to everyone", v))
	}
	return out
}

var (
	aclTableRe   = regexp.MustCompile(`(?s)<<-?[ \t]*'?ACLS'?[ \t]*\n(.*?)\n[ \t]*ACLS[ \t]*(?:\n|$)`)
	aclAllRe     = regexp.MustCompile(`(?i)--operation[\s=]+['"]?all\b`)
	aclPatternRe = regexp.MustCompile(`(?i)--resource-pattern-type[\s=]+['"]?(prefixed|match|any)\b`)
	aclStarRe    = regexp.MustCompile(`--(topic|group)[\s=]+['"]?\*`)
)

// KafkaGrants reads an init script's table of grants: the lines of its heredoc
// <<'ACLS' ... ACLS, each "user operations type [name]" (operations comma-separated,
// no name for the cluster); blank lines and # lines are skipped, as the script does.
func KafkaGrants(script string) ([]KafkaACL, error) {
	tables := aclTableRe.FindAllStringSubmatch(script, -1)
	if len(tables) == 0 {
		return nil, fmt.Errorf("no table of grants (a heredoc <<'ACLS' ... ACLS)")
	}
	var out []KafkaACL
	for _, tb := range tables {
		for _, line := range strings.Split(tb[1], "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || strings.HasPrefix(f[0], "#") {
				continue
			}
			if len(f) < 3 || len(f) > 4 || (f[2] != "cluster" && len(f) != 4) {
				return nil, fmt.Errorf("grant %q: want user operations type [name]", strings.TrimSpace(line))
			}
			name := ""
			switch f[2] {
			case "cluster":
			case "topic", "group":
				name = f[3]
			default:
				return nil, fmt.Errorf("grant %q: type %q is none of topic, group, cluster", strings.TrimSpace(line), f[2])
			}
			for _, op := range strings.Split(f[1], ",") {
				if op != "" {
					out = append(out, KafkaACL{User: f[0], Operation: op, Type: f[2], Name: name})
				}
			}
		}
	}
	return out, nil
}

// CheckKafkaACLs checks an init script's grants: it adds them with kafka-acls.sh as
// user broker (--command-config), every client user (KafkaUsers but broker) gets
// exactly its KafkaACLs, and nothing grants All, a prefixed or matching pattern, or a
// wildcard topic or group but the exporter's Describe.
func CheckKafkaACLs(script string) []string {
	var out []string
	if !strings.Contains(script, "kafka-acls.sh") || !strings.Contains(script, "--add") || !strings.Contains(script, "--command-config") {
		out = append(out, "the init script adds no ACLs (kafka-acls.sh --add with --command-config)")
	}
	if !strings.Contains(script, `username="broker"`) {
		out = append(out, `the init script must add the ACLs as user broker (username="broker" in its --command-config)`)
	}
	if aclAllRe.MatchString(script) {
		out = append(out, "the init script grants --operation All")
	}
	if m := aclPatternRe.FindString(script); m != "" {
		out = append(out, fmt.Sprintf("the init script grants by pattern (%s); grants name literal resources", m))
	}
	if m := aclStarRe.FindString(script); m != "" {
		out = append(out, fmt.Sprintf("the init script grants on every resource outside its table (%s)", m))
	}
	grants, err := KafkaGrants(script)
	if err != nil {
		return append(out, err.Error())
	}
	key := func(a KafkaACL) KafkaACL {
		a.Operation, a.Type = strings.ToLower(a.Operation), strings.ToLower(a.Type)
		return a
	}
	want := map[KafkaACL]bool{}
	for _, a := range KafkaACLs {
		want[key(a)] = true
	}
	got := map[KafkaACL]bool{}
	users := map[string]bool{}
	for _, g := range grants {
		got[key(g)], users[g.User] = true, true
		switch {
		case g.User == "broker" || !slices.Contains(KafkaUsers, g.User):
			out = append(out, fmt.Sprintf("grant %s: %s is not a client user of %v", g, g.User, KafkaUsers))
		case strings.EqualFold(g.Operation, "All"):
			out = append(out, fmt.Sprintf("grant %s: All is every operation, name the ones needed", g))
		case g.Name == "*" && !(g.User == "kafka-exporter" && strings.EqualFold(g.Operation, "Describe")):
			out = append(out, fmt.Sprintf("grant %s: only the exporter's Describe may name every %s", g, g.Type))
		case !want[key(g)]:
			out = append(out, fmt.Sprintf("grant %s: more than %s needs (KafkaACLs)", g, g.User))
		}
	}
	for _, a := range KafkaACLs {
		if !got[key(a)] {
			out = append(out, fmt.Sprintf("no grant %s: %s needs it", a, a.User))
		}
	}
	for _, u := range KafkaUsers {
		if u != "broker" && !users[u] {
			out = append(out, fmt.Sprintf("client user %s is granted nothing: every request it makes is refused", u))
		}
	}
	return out
}
