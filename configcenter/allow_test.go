package configcenter

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A switches document whose shardAddrs names a server outside the deploy's
// allowlist is refused whole, as a malformed one is: none of its switches apply,
// so whoever can write the document cannot send the services' Redis password, or
// their takes, to a server of their choosing. An allowed server applies.
func TestADocumentPointingAShardAtAServerNotAllowedIsRefusedWhole(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "switches.json")
	write := func(doc string) {
		if err := os.WriteFile(path+".tmp", []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	h := NewHolder()
	h.AllowShardAddrs(func(addr string) bool { return addr == "10.0.0.5:6379" })
	m := NewMetrics(prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	write(`{"grabEnabled": false, "shardAddrs": {"3": "evil.example:6379"}}`)
	go Follow(ctx, FileSource{Path: path, Interval: 10 * time.Millisecond}, h, m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	time.Sleep(100 * time.Millisecond)
	if s := h.Load(); !s.GrabEnabled || len(s.ShardAddrOverrides()) != 0 {
		t.Fatalf("a document naming a server not allowed was applied: grabEnabled %v, shardAddrs %v", s.GrabEnabled, s.ShardAddrOverrides())
	}
	write(`{"grabEnabled": false, "shardAddrs": {"3": "10.0.0.5:6379"}}`)
	for deadline := time.Now().Add(5 * time.Second); h.Load().GrabEnabled; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a document naming an allowed server was not applied")
		}
	}
	if got := h.Load().ShardAddrOverrides()[3]; got != "10.0.0.5:6379" {
		t.Fatalf("shardAddrs.3 = %q", got)
	}
}
