package shardmark

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
)

const shard = 4

func read(t *testing.T, c redis.UniversalClient) Status {
	t.Helper()
	st, err := Read(context.Background(), c, shard)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The marker's life on one server: missing, written (naming this server), kept by
// an if-absent write, replaced by a plain one; a marker written before run_ids were
// recorded is trusted; the fence marker is read beside it.
func TestMarkersOnOneServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.StartRedis(t, testenv.Volatile).Client()
	if st := read(t, c); st.Built != Missing || st.Rebuilding || st.ServerRunID == "" {
		t.Fatalf("empty server: %+v, want Missing, not rebuilding, with the server's run_id", st)
	}
	if err := MarkBuilt(ctx, c, shard, "test", 2, true); err != nil {
		t.Fatal(err)
	}
	st := read(t, c)
	if st.Built != Whole || st.MarkerRunID != st.ServerRunID {
		t.Fatalf("after MarkBuilt: %+v, want Whole naming this server", st)
	}
	if err := MarkBuilt(ctx, c, shard, "other", 9, true); err != nil {
		t.Fatal(err)
	}
	if v := c.Get(ctx, promo.BuiltKey(shard)).Val(); !strings.Contains(v, `"by":"test"`) {
		t.Fatalf("an if-absent write replaced the marker: %s", v)
	}
	if err := MarkBuilt(ctx, c, shard, "rebuild", 9, false); err != nil {
		t.Fatal(err)
	}
	if v := c.Get(ctx, promo.BuiltKey(shard)).Val(); !strings.Contains(v, `"by":"rebuild"`) {
		t.Fatalf("a plain write kept the old marker: %s", v)
	}
	c.Set(ctx, promo.BuiltKey(shard), `{"by":"bin/recovery rebuild","at":"2026-01-01T00:00:00Z","promotions":3}`, 0)
	c.Set(ctx, promo.FenceKey(shard), "x", time.Minute)
	if st := read(t, c); st.Built != Whole || !st.Rebuilding {
		t.Fatalf("a marker without a run_id under a fence: %+v, want Whole and rebuilding", st)
	}
}

// A replica promoted in a failover holds the marker its master wrote, replicated:
// it reads as Moved until a marker of its own is written (by the rebuild).
func TestAPromotedReplicaIsMoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master := testenv.StartRedis(t, testenv.Volatile)
	replica := testenv.StartRedis(t, testenv.Volatile)
	m, r := master.Client(), replica.Client()
	if err := MarkBuilt(ctx, m, shard, "rebuild", 1, false); err != nil {
		t.Fatal(err)
	}
	replica.FailOverFrom(master)
	st := read(t, r)
	if st.Built != Moved || st.MarkerRunID != read(t, m).ServerRunID {
		t.Fatalf("promoted replica: %+v, want Moved with the master's run_id in the marker", st)
	}
	if st := read(t, m); st.Built != Whole {
		t.Fatalf("the old master itself: %+v, want Whole", st)
	}
	if err := MarkBuilt(ctx, r, shard, "rebuild", 1, false); err != nil {
		t.Fatal(err)
	}
	if st := read(t, r); st.Built != Whole {
		t.Fatalf("after the rebuild's marker: %+v, want Whole", st)
	}
}

func TestRunIDFromInfo(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nrun_id:abc123\r\ntcp_port:6379\r\n"
	if have := runID(info); have != "abc123" {
		t.Fatalf("runID = %q, want abc123", have)
	}
	if have := runID("# Server\r\n"); have != "" {
		t.Fatalf("runID of no run_id = %q", have)
	}
}
