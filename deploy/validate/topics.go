package validate

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The Kafka topics the deploy files create.
const (
	FlowTopic       = "promo-grab-flow"
	DeadLetterTopic = "promo-grab-flow-dlq"
)

// MinFlowRetentionMs is the shortest retention the flow topic may have: the longest
// MySQL outage the runbook plans for (7 days). An outage longer than the retention
// loses events the sink never stored (flashsale_sink_lost_events).
const MinFlowRetentionMs = 7 * 24 * 3600 * 1000

// TopicSpec is what a deploy file's topic creation sets for one topic.
type TopicSpec struct {
	Partitions  int
	RetentionMs int64 // 0: not set (the broker's default)
}

// TopicsCreated reads the topics an init script creates from the Kafka tool calls it
// made (each the tool's name, then its arguments): kafka-topics.sh --create and the
// retention kafka-configs.sh --alter sets on a topic that existed before.
func TopicsCreated(calls [][]string) map[string]TopicSpec {
	out := map[string]TopicSpec{}
	for _, args := range calls {
		switch {
		case args[0] == "kafka-topics.sh" && slices.Contains(args, "--create"):
			name := argValue(args, "--topic")
			spec := out[name]
			spec.Partitions, _ = strconv.Atoi(argValue(args, "--partitions"))
			if r, ok := configValue(args, "--config", "retention.ms"); ok {
				spec.RetentionMs = r
			}
			out[name] = spec
		case args[0] == "kafka-configs.sh" && slices.Contains(args, "--alter") && argValue(args, "--entity-type") == "topics":
			name := argValue(args, "--entity-name")
			if r, ok := configValue(args, "--add-config", "retention.ms"); ok {
				spec := out[name]
				spec.RetentionMs = r
				out[name] = spec
			}
		}
	}
	return out
}

func argValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// configValue finds key=value among the values of flag (a comma-separated list each).
func configValue(args []string, flag, key string) (int64, bool) {
	for i, a := range args {
		if a != flag || i+1 >= len(args) {
			continue
		}
		for _, kv := range strings.Split(args[i+1], ",") {
			if v, ok := strings.CutPrefix(kv, key+"="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// CheckTopics: the flow topic has the partitions the code expects (a request's events
// share one by key; a different count reorders them) and a retention of at least
// MinFlowRetentionMs; its dead letters are kept longer still.
func CheckTopics(topics map[string]TopicSpec, flowPartitions int) []string {
	var errs []string
	flow, ok := topics[FlowTopic]
	if !ok {
		return []string{"creates no topic " + FlowTopic}
	}
	if flow.Partitions != flowPartitions {
		errs = append(errs, fmt.Sprintf("%s has %d partitions, the code expects %d (the order of a request's events depends on it)",
			FlowTopic, flow.Partitions, flowPartitions))
	}
	if flow.RetentionMs < MinFlowRetentionMs {
		errs = append(errs, fmt.Sprintf("%s: retention.ms %d, want an explicit one of at least %d (7 days: the longest MySQL outage that loses no event)",
			FlowTopic, flow.RetentionMs, int64(MinFlowRetentionMs)))
	}
	dlq, ok := topics[DeadLetterTopic]
	switch {
	case !ok:
		errs = append(errs, "creates no topic "+DeadLetterTopic)
	case dlq.Partitions < 1:
		errs = append(errs, fmt.Sprintf("%s: %d partitions", DeadLetterTopic, dlq.Partitions))
	case dlq.RetentionMs <= flow.RetentionMs:
		errs = append(errs, fmt.Sprintf("%s: retention.ms %d, want one longer than %s's (%d): dead letters wait for on-call",
			DeadLetterTopic, dlq.RetentionMs, FlowTopic, flow.RetentionMs))
	}
	return errs
}

var (
	seedFlowRe   = regexp.MustCompile(`SeedTopics\((\d+), flow\.Topic\)`)
	brokerFlowRe = regexp.MustCompile(`flowPartitions\s*=\s*(\d+)`)
)

// FlowPartitions is the flow topic's partition count the code is built and tested
// with: the local broker's flowPartitions and every test cluster seeded with
// flow.Topic, which must agree.
func FlowPartitions(root string) (int, error) {
	counts := map[int][]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "validate" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, re := range []*regexp.Regexp{seedFlowRe, brokerFlowRe} {
			for _, m := range re.FindAllStringSubmatch(string(data), -1) {
				n, _ := strconv.Atoi(m[1])
				counts[n] = append(counts[n], rel)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(counts) != 1 {
		return 0, fmt.Errorf("the code does not agree on the flow topic's partitions (count: files): %v", counts)
	}
	for n := range counts {
		return n, nil
	}
	return 0, nil
}
