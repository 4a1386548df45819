package validate

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every in-page link of the runbook leads to a heading, and the failures the issue
// names each have a section.
func TestRunbookLinksAndSections(t *testing.T) {
	data, err := os.ReadFile(Path("deploy", "RUNBOOK.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := runbookAnchors(t)
	for _, m := range regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(string(data), -1) {
		if !anchors[m[1]] {
			t.Errorf("deploy/RUNBOOK.md links #%s, which is no heading", m[1])
		}
	}
	for _, want := range []string{"redis-shard-lost", "kafka-down", "mysql-down", "promotion-oversubscribed", "switches"} {
		if !anchors[want] {
			t.Errorf("deploy/RUNBOOK.md has no section %q", want)
		}
	}
	// Each switch of the document is explained.
	var errs Errs
	for name := range switchesStructs(&errs)["Switches"] {
		if !strings.Contains(string(data), "`"+name) {
			t.Errorf("deploy/RUNBOOK.md does not explain switch %s", name)
		}
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}
