package kcattest

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"
)

// occurredAt: RFC 3339, UTC, to the millisecond at most.
var occurredAt = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,3})?Z$`)

// decode reads a payload keeping numbers exact, so an integer field can be told
// from a fractional one.
func decode(t *testing.T, payload string) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(payload)))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("payload is not a JSON object: %v: %s", err, payload)
	}
	return v
}

func str(v map[string]any, k string) (string, bool) {
	s, ok := v[k].(string)
	return s, ok && s != ""
}

func integer(v map[string]any, k string) (int64, bool) {
	n, ok := v[k].(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	return i, err == nil
}

func checkTime(t *testing.T, v map[string]any, payload string) time.Time {
	t.Helper()
	s, _ := str(v, "occurredAt")
	at, err := time.Parse(time.RFC3339Nano, s)
	if !occurredAt.MatchString(s) || err != nil {
		t.Errorf("occurredAt %q is not RFC 3339 UTC to the ms: %s", s, payload)
	}
	return at
}

// checkFlowEvent holds an event to docs/CONTRACT.md, "Flow events".
func checkFlowEvent(t *testing.T, m message, id string) {
	t.Helper()
	v := decode(t, m.Payload)
	for _, k := range []string{"eventId", "kind", "requestId", "pin", "ip"} {
		if _, ok := str(v, k); !ok {
			t.Errorf("flow event without string %s: %s", k, m.Payload)
		}
	}
	if k, _ := str(v, "kind"); !slices.Contains([]string{"GRAB", "CANCEL", "CONFIRM"}, k) {
		t.Errorf("flow event kind %q: %s", k, m.Payload)
	}
	if _, ok := v["holdUntil"]; ok {
		t.Errorf("holdUntil on an event of a grab without holdSeconds: %s", m.Payload)
	}
	// channel: a GRAB's, one of the contract's names, left out when the grab named
	// none (these grabs name none); never on a CANCEL or CONFIRM.
	if c, ok := v["channel"]; ok {
		k, _ := str(v, "kind")
		if s, _ := c.(string); k != "GRAB" || !slices.Contains([]string{"APP", "WECHAT", "QQ", "WEB"}, s) {
			t.Errorf("flow event channel %v: %s", c, m.Payload)
		}
	}
	if m.Key == nil || *m.Key == "" {
		t.Errorf("flow event without a message key: %s", m.Payload)
	}
	checkTime(t, v, m.Payload)
	items, _ := v["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("flow event items: want one item, have %v: %s", v["items"], m.Payload)
	}
	it, _ := items[0].(map[string]any)
	if p, _ := str(it, "promoId"); p != id {
		t.Errorf("item promoId %q, want %q", p, id)
	}
	for _, k := range []string{"type", "num", "shard"} {
		if _, ok := integer(it, k); !ok {
			t.Errorf("item without integer %s: %s", k, m.Payload)
		}
	}
}

// checkStateEvent holds an event to docs/CONTRACT.md, "Promotion state events":
// exactly the documented fields, keyed by its promotion key.
func checkStateEvent(t *testing.T, m message, id, key string) {
	t.Helper()
	v := decode(t, m.Payload)
	if m.Key == nil || *m.Key != key {
		t.Errorf("state event message key %s, want %q: %s", keyOf(m), key, m.Payload)
	}
	if len(v) != 6 {
		t.Errorf("state event fields: want promotionKey, promoId, type, state, seq, occurredAt only: %s", m.Payload)
	}
	if s, _ := str(v, "promotionKey"); s != key {
		t.Errorf("promotionKey %q, want %q", s, key)
	}
	if s, _ := str(v, "promoId"); s != id {
		t.Errorf("promoId %q, want %q", s, id)
	}
	if n, ok := integer(v, "type"); !ok || n != 1 {
		t.Errorf("type: want integer 1: %s", m.Payload)
	}
	if s, _ := str(v, "state"); !slices.Contains([]string{"SOLD_OUT", "RESTOCKED", "STOPPED", "ENDED", "DELETED"}, s) {
		t.Errorf("state %q is none of the contract's: %s", s, m.Payload)
	}
	at := checkTime(t, v, m.Payload)
	if seq, ok := integer(v, "seq"); !ok || seq < at.UnixMilli() {
		t.Errorf("seq must be an integer at least occurredAt in unix ms: %s", m.Payload)
	}
}

func keyOf(m message) string {
	if m.Key == nil {
		return "(none)"
	}
	return strconv.Quote(*m.Key)
}
