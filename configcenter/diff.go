package configcenter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// Change is one switch that differs between two versions of the document, as the
// switch history shows it. Values are compared as the services apply them: a field
// a document leaves out holds its default.
type Change struct {
	// Switch is the switch's name, dotted below an object: kafkaDegrade,
	// methodLimits.grab, shardAddrs.3; "(document)" when the version before did
	// not parse (it is then compared as the defaults).
	Switch string `json:"switch"`
	// Before and After are the value as compact JSON ("" for a shard address not
	// set); of a list, its number of entries. At most MaxChangeValue bytes.
	Before string `json:"before"`
	After  string `json:"after"`
	// Added and Removed are a list's entries that came and went, at most
	// MaxChangeEntries each (AddedCount and RemovedCount say how many in all).
	Added        []string `json:"added,omitempty"`
	Removed      []string `json:"removed,omitempty"`
	AddedCount   int      `json:"addedCount,omitempty"`
	RemovedCount int      `json:"removedCount,omitempty"`
}

// Bounds of a Change, so that a history entry stays small whatever the documents.
const (
	MaxChangeValue   = 200
	MaxChangeEntries = 20
)

// Diff lists the switches that differ from before to after, sorted by name.
// An empty before is the defaults; an after that does not parse is an error.
func Diff(before, after []byte) ([]Change, error) {
	to, err := appliedOf(after)
	if err != nil {
		return nil, err
	}
	var out []Change
	from, err := appliedOf(before)
	if err != nil {
		out = append(out, Change{Switch: "(document)", Before: clip("did not parse: " + err.Error()), After: "valid"})
		from = Default().WithLists()
	}
	a, b := flattenSwitches(from), flattenSwitches(to)
	names := make([]string, 0, len(a)+len(b))
	for k := range a {
		names = append(names, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		if c, differs := change(k, a[k], b[k]); differs {
			out = append(out, c)
		}
	}
	return out, nil
}

// appliedOf is the document as the services apply it; empty is the defaults.
func appliedOf(doc []byte) (Switches, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return Default().WithLists(), nil
	}
	snap, err := Parse(doc)
	if err != nil {
		return Switches{}, err
	}
	return snap.Switches.WithLists(), nil
}

// flattenSwitches maps each switch's dotted name to its value: a list as its
// entries, anything else as compact JSON.
func flattenSwitches(s Switches) map[string]any {
	b, _ := json.Marshal(s) // a Switches always encodes
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			switch v := v.(type) {
			case map[string]any:
				walk(prefix+k+".", v)
			case []any:
				list := make([]string, len(v))
				for i, e := range v {
					list[i] = fmt.Sprint(e)
				}
				out[prefix+k] = list
			default:
				j, _ := json.Marshal(v)
				out[prefix+k] = string(j)
			}
		}
	}
	walk("", m)
	return out
}

// change compares one switch's two values.
func change(name string, before, after any) (Change, bool) {
	bl, isList := before.([]string)
	al, _ := after.([]string)
	if isList || al != nil {
		added, removed := setDiff(bl, al), setDiff(al, bl)
		if len(added) == 0 && len(removed) == 0 {
			return Change{}, false
		}
		return Change{Switch: name, Before: entries(len(bl)), After: entries(len(al)),
			Added: head(added), Removed: head(removed), AddedCount: len(added), RemovedCount: len(removed)}, true
	}
	bs, _ := before.(string)
	as, _ := after.(string)
	return Change{Switch: name, Before: clip(bs), After: clip(as)}, bs != as
}

// setDiff is the entries of b not in a, in b's order.
func setDiff(a, b []string) []string {
	in := make(map[string]bool, len(a))
	for _, e := range a {
		in[e] = true
	}
	var out []string
	for _, e := range b {
		if !in[e] {
			out = append(out, e)
		}
	}
	return out
}

func head(l []string) []string {
	if len(l) > MaxChangeEntries {
		l = l[:MaxChangeEntries]
	}
	return slices.Clone(l)
}

func entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}

// clip bounds a value to MaxChangeValue bytes, cut on a rune boundary.
func clip(s string) string {
	if len(s) <= MaxChangeValue {
		return s
	}
	cut := MaxChangeValue - len("…")
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
