package configcenter

import (
	"strings"
	"testing"
)

// Check refuses what Follow would reject: a malformed document, and a shardAddrs
// server outside the allowlist; it accepts the rest and names its version.
func TestCheckRefusesWhatFollowRejects(t *testing.T) {
	h := NewHolder()
	h.AllowShardAddrs(func(addr string) bool { return strings.HasPrefix(addr, "redis-") })
	if _, err := h.Check([]byte(`{"grabEnabled":"no"}`)); err == nil {
		t.Error("a malformed document passed")
	}
	if _, err := h.Check([]byte(`{"shardAddrs":{"3":"10.9.9.9:6379"}}`)); err == nil || !strings.Contains(err.Error(), "not among the servers allowed") {
		t.Errorf("a server outside the allowlist: %v", err)
	}
	doc := []byte(`{"shardAddrs":{"3":"redis-3b:6379"}}`)
	snap, err := h.Check(doc)
	if err != nil || snap.MD5 != MD5(doc) || string(snap.Doc) != string(doc) {
		t.Errorf("an allowed document: %+v %v", snap, err)
	}
	if h.Load().MD5 != "default" {
		t.Error("Check put a document in force")
	}
}
