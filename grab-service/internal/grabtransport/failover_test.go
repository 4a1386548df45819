package grabtransport_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardmark"
	"github.com/flashsale/platform/internal/testenv"
)

// On-call moves a shard to another server through the switches (a failover to a
// promoted replica): grab-service fences the shard at once, reads the new
// server's markers before it serves it (a rebuild at work there keeps it fenced),
// and then grabs take from the new server, none from the old.
func TestShardMovedByTheSwitches(t *testing.T) {
	e := newEnv(t, appShards)
	ctx := context.Background()
	id := e.promotion("moved", spec{total: 10})
	key := promo.Key(id, 1)
	shard := ring.Default.Shard(key)
	if a := e.grab(grabBody("before", "p1", "10.0.0.1", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("grab before the move: %s", a.raw)
	}
	// The promoted replica: the promotion as the old master had it, and a rebuild
	// at work on it (its fence marker).
	replica := testenv.StartRedis(t, testenv.Volatile)
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer rc.Close()
	if err := rc.Set(ctx, promo.FenceKey(shard), "rebuild", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	h := e.hash(id) // what the rebuild restores: the hash as the record has it
	if err := rc.HSet(ctx, key, "total", h.Total, "remaining", h.Remaining, "maxPerGrab", h.MaxPerGrab,
		"rateWindowMs", 60000, "startMs", h.StartMs, "endMs", h.EndMs, "state", "ACTIVE", "ver", 1).Err(); err != nil {
		t.Fatal(err)
	}

	snap, err := configcenter.Parse([]byte(`{"shardAddrs": {"` + strconv.Itoa(shard) + `": "` + replica.Addr + `"}}`))
	if err != nil {
		t.Fatal(err)
	}
	e.switches.Store(snap)
	if !e.fence.Fenced(shard) {
		t.Fatal("the moved shard is not fenced at once")
	}
	if a := e.grab(grabBody("while-fenced", "p2", "10.0.0.1", id, 1)); a.status != http.StatusServiceUnavailable {
		t.Fatalf("grab while the new server is rebuilt: %d %s", a.status, a.raw)
	}
	time.Sleep(300 * time.Millisecond) // the fence's own read of the new server
	// A poll's reads are given all the time they need: one cut short by a slow
	// machine decides nothing, and the shard would stay fenced below for no reason.
	const pollWithin = 30 * time.Second
	e.fence.Poll(ctx, pollWithin)
	if !e.fence.Fenced(shard) {
		t.Fatal("a server with a rebuild at work is served")
	}
	// The rebuild is done: its markers say so, and the next read opens the shard.
	rc.Del(ctx, promo.FenceKey(shard))
	if err := shardmark.MarkBuilt(ctx, rc, shard, "test", 1, false); err != nil {
		t.Fatal(err)
	}
	e.fence.Poll(ctx, pollWithin)
	if e.fence.Fenced(shard) {
		t.Fatalf("fence still up after the rebuild: %+v", e.fence.Status())
	}
	if a := e.grab(grabBody("after", "p3", "10.0.0.1", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("grab after the move: %s", a.raw)
	}
	if got := rc.HGet(ctx, key, "remaining").Val(); got != strconv.FormatInt(h.Remaining-1, 10) {
		t.Fatalf("the new server's remaining is %s, want %d", got, h.Remaining-1)
	}
	if after := e.hash(id); after.Remaining != h.Remaining {
		t.Fatalf("the old server was taken from after the move: remaining %d, was %d", after.Remaining, h.Remaining)
	}
}
