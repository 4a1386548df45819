// Package privilege runs recovery's rebuild and verify as deploy/security's
// Redis user recovery and MySQL user flashsale_recovery against real servers:
// both succeed, the servers refused nothing on the way, and what recovery has no
// business with (scripts, FLUSHALL, CONFIG, KEYS) is refused.
package privilege

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/privilege"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/recovery/internal/rebuild"
	"github.com/flashsale/platform/recovery/internal/recoverytest"
	"github.com/flashsale/platform/recovery/internal/verify"
)

func shards(c redis.UniversalClient) []redis.UniversalClient {
	out := make([]redis.UniversalClient, ring.Shards)
	for i := range out {
		out[i] = c
	}
	return out
}

func TestRecoveryRunsWithinItsRules(t *testing.T) {
	r := privilege.StartRedis(t)
	m := privilege.StartMySQL(t)
	ctx := context.Background()
	root, err := store.Open(ctx, m.RootDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	// The sale's state, written by the test's own (default) user: a promotion, a
	// held grant in the record.
	key := recoverytest.Create(t, root.Promotions, shards(r.Admin), recoverytest.Spec{PromoID: "acl", Total: 10, PerPin: 2, PerIP: 5})
	shard := ring.Default.Shard(key)
	// A requestId whose index entry lives on the promotion's shard: the rebuild
	// restores it there (SET R_*), the part ~R_* allows.
	rid := promo.RequestIDBeside("rid-1", key)
	ev := flow.Event{EventID: "e1", Kind: flow.Grab, RequestID: rid, Pin: "p1", IP: "10.0.0.1", BodyHash: "h",
		Items: []flow.Item{{PromoID: "acl", Type: 1, Num: 1, Shard: shard}}, OccurredAt: flow.Stamp(time.Now()),
		HoldUntil: time.Now().Add(time.Hour).UnixMilli()}
	if _, err := root.Flows.InsertFlows(ctx, []flow.Event{ev}); err != nil {
		t.Fatal(err)
	}

	r.ResetLog()
	rec := m.Store(privilege.MySQLRecovery)
	c := shards(r.Client(privilege.RedisRecovery))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := rebuild.Defaults()
	o.Shards, o.Settle, o.Force, o.AdminGrace, o.ServeTimeout = []int{shard}, 50*time.Millisecond, true, 100*time.Millisecond, 200*time.Millisecond
	if _, err := rebuild.Run(ctx, rebuild.Deps{Shards: c, Record: rec.Rebuild, Flows: rec.Flows, Log: log}, o); err != nil {
		t.Errorf("rebuild as recovery: %v", err)
	}
	if n, err := r.Admin.Exists(ctx, promo.RequestIndexKey(rid)).Result(); err != nil || n != 1 {
		t.Errorf("the rebuild did not restore the request index entry %s: %d %v", promo.RequestIndexKey(rid), n, err)
	}
	vo := verify.Defaults()
	vo.Shards, vo.Index = []int{shard}, true
	if rep, err := verify.Run(ctx, verify.Deps{Shards: c, Record: rec.Rebuild, Log: log}, vo); err != nil {
		t.Errorf("verify as recovery: %v (%+v)", err, rep)
	}
	r.NoDenials()
	r.Refused(privilege.RedisRecovery, []any{"flushall"}, []any{"flushdb"}, []any{"config", "set", "maxmemory", "1"},
		[]any{"keys", "*"}, []any{"eval", "return 1", "0"}, []any{"script", "load", "return 1"},
		[]any{"set", "other:key", "1"}, []any{"publish", "x", "y"})
}
