package configcenter

import (
	"fmt"
	"strings"
	"testing"
)

// Diff names each switch that differs as the services apply it: absent fields are
// their defaults, lists by the entries that came and went (bounded), a version
// before that did not parse as the defaults, with a line saying so.
func TestDiffNamesEachSwitchThatDiffers(t *testing.T) {
	got, err := Diff(nil, []byte(`{"kafkaDegrade":true,"methodLimits":{"grab":5},"blockedPins":["p1","p2"],"shardAddrs":{"3":"10.0.0.1:6379"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"blockedPins 0 entries->2 entries +[p1 p2] -[]",
		"kafkaDegrade false->true",
		"methodLimits.grab 0->5",
		`shardAddrs.3 ->"10.0.0.1:6379"`,
	}
	if have := render(got); strings.Join(have, "\n") != strings.Join(want, "\n") {
		t.Errorf("from the defaults:\nhave %q\nwant %q", have, want)
	}

	same, err := Diff([]byte(`{"grabEnabled":true}`), []byte(`{}`))
	if err != nil || len(same) != 0 {
		t.Errorf("a field set to its default is no change: %+v %v", same, err)
	}

	many := make([]string, 50)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("pin%d", i))
	}
	got, err = Diff([]byte(`{"grabEnabled":"x"}`), []byte(`{"blockedPins":[`+strings.Join(many, ",")+`]}`))
	if err != nil || len(got) != 2 || got[0].Switch != "(document)" || !strings.HasPrefix(got[0].Before, "did not parse") ||
		len(got[1].Added) != MaxChangeEntries || got[1].AddedCount != 50 {
		t.Errorf("from a broken document to a long list: %+v %v", got, err)
	}

	if _, err := Diff(nil, []byte(`{"grabEnabled":"no"}`)); err == nil {
		t.Error("a document after that does not parse must be an error")
	}
	if c := clip(strings.Repeat("é", 300)); len(c) > MaxChangeValue || !strings.HasSuffix(c, "…") {
		t.Errorf("clip: %d bytes %q", len(c), c[len(c)-8:])
	}
}

func render(cs []Change) []string {
	var out []string
	for _, c := range cs {
		s := fmt.Sprintf("%s %s->%s", c.Switch, c.Before, c.After)
		if c.Added != nil || c.Removed != nil {
			s += fmt.Sprintf(" +%v -%v", c.Added, orEmpty(c.Removed))
		}
		out = append(out, s)
	}
	return out
}

func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
