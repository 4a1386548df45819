package lua

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

func runCmd(t *testing.T, queue func(p redis.Pipeliner) *redis.Cmd) *redis.Cmd {
	t.Helper()
	p := rdb.Pipeline()
	cmd := queue(p)
	_, _ = p.Exec(context.Background())
	return cmd
}

// claimhold.lua claims as SET NX GET does and registers the hold only when it
// claimed: a replay or another body finds the entry and leaves the hold alone.
func TestClaimHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := promoKey(t, "idx")
	holds := k + ":holds"
	claim := func(entry string, deadline int64) *redis.Cmd {
		return runCmd(t, func(p redis.Pipeliner) *redis.Cmd {
			return QueueClaimHold(ctx, p, k, holds, []byte(entry), 60, deadline, "r1")
		})
	}
	if err := claim("first", 1000).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("first claim: %v, want redis.Nil (claimed)", err)
	}
	if old, err := claim("second", 9000).Text(); err != nil || old != "first" {
		t.Fatalf("second claim: %q %v, want the first entry", old, err)
	}
	if v := rdb.Get(ctx, k).Val(); v != "first" {
		t.Fatalf("entry %q after a second claim", v)
	}
	if s := rdb.ZScore(ctx, holds, "r1").Val(); s != 1000 {
		t.Fatalf("hold deadline %v, want the first claim's 1000", s)
	}
	if ttl := rdb.TTL(ctx, k).Val(); ttl <= 0 {
		t.Fatalf("index entry without its TTL: %v", ttl)
	}
	bad := runCmd(t, func(p redis.Pipeliner) *redis.Cmd {
		return claimHoldScript.EvalSha(ctx, p, []string{k, holds}, "e", "soon", 1, "r2")
	})
	if bad.Err() == nil || rdb.ZScore(ctx, holds, "r2").Err() == nil {
		t.Fatalf("a malformed claim: %v; it must raise before any write", bad.Err())
	}
}

// holddue.lua moves the due holds to expiring and leases them: a caller sees a
// hold once per lease, the one that died mid-return leaves it to the next lease,
// and holds not due stay.
func TestHoldsDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := promoKey(t, "holds")
	holds := k + ":holds"
	expiring := promo.ExpiringKey(holds)
	rdb.ZAdd(ctx, holds, redis.Z{Score: 100, Member: "a"}, redis.Z{Score: 200, Member: "b"}, redis.Z{Score: 900, Member: "later"})
	due := func(now int64, limit int) []string {
		t.Helper()
		rids, err := ParseHoldsDue(runCmd(t, func(p redis.Pipeliner) *redis.Cmd {
			return QueueHoldsDue(ctx, p, holds, expiring, now, 50, limit)
		}))
		if err != nil {
			t.Fatal(err)
		}
		return rids
	}
	if got := due(150, 10); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("due at 150: %v, want [a]", got)
	}
	if got := due(160, 10); len(got) != 0 {
		t.Fatalf("a leased hold handed out again within its lease: %v", got)
	}
	if got := due(250, 1); !reflect.DeepEqual(got, []string{"a"}) { // a's lease ended at 200; b moved, limit 1
		t.Fatalf("due at 250, limit 1: %v, want [a] (the lease that ran out first)", got)
	}
	if got := due(251, 10); !reflect.DeepEqual(got, []string{"b"}) {
		t.Fatalf("due at 251: %v, want [b]", got)
	}
	rdb.ZRem(ctx, expiring, "a", "b") // returned
	if got := due(400, 10); len(got) != 0 {
		t.Fatalf("due at 400 after the returns: %v", got)
	}
	if s := rdb.ZScore(ctx, holds, "later").Val(); s != 900 {
		t.Fatalf("a hold not due was touched: %v", s)
	}
	if err := runCmd(t, func(p redis.Pipeliner) *redis.Cmd { return QueueHoldsDue(ctx, p, holds, expiring, 1, 0, 10) }).Err(); err == nil {
		t.Fatal("a lease of 0 ms accepted")
	}
}

// TestReclaimIsACompareAndSet: reclaim.lua rewrites an index entry only while it
// holds what the caller saw, and keeps its expiry.
func TestReclaimIsACompareAndSet(t *testing.T) {
	ctx := context.Background()
	key := "R_" + t.Name()
	if err := rdb.Set(ctx, key, "first", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	reclaim := func(seen, entry string) int64 {
		t.Helper()
		var cmd *redis.Cmd
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			cmd = QueueReclaim(ctx, p, key, seen, []byte(entry))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		n, err := cmd.Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := reclaim("another", "second"); n != 0 || rdb.Get(ctx, key).Val() != "first" {
		t.Fatalf("a stale view rewrote the entry: %d %q", n, rdb.Get(ctx, key).Val())
	}
	if n := reclaim("first", "second"); n != 1 || rdb.Get(ctx, key).Val() != "second" {
		t.Fatalf("the current view did not rewrite it: %d %q", n, rdb.Get(ctx, key).Val())
	}
	if ttl := rdb.TTL(ctx, key).Val(); ttl < 59*time.Minute {
		t.Fatalf("expiry %s after the rewrite, want the hour kept", ttl)
	}
	rdb.Del(ctx, key)
	if n := reclaim("second", "third"); n != 0 || rdb.Exists(ctx, key).Val() != 0 {
		t.Fatalf("a gone entry was made again: %d", n)
	}
}

// confirmhold.lua: a lift moves the hold to confirming with its deadline, so expiry
// no longer sees it; a second confirm finds it confirming; a restore puts it back
// unless an acknowledged confirm took it out; a hold being returned, or none, is said.
func TestConfirmHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	holds := promoKey(t, "holds")
	lift := func(rid string) (HoldLift, int64, error) {
		return ParseLiftHold(runCmd(t, func(p redis.Pipeliner) *redis.Cmd { return QueueLiftHold(ctx, p, holds, rid) }))
	}
	restore := func(rid string) int64 {
		return runCmd(t, func(p redis.Pipeliner) *redis.Cmd { return QueueRestoreHold(ctx, p, holds, rid) }).Val().(int64)
	}
	rdb.ZAdd(ctx, holds, redis.Z{Score: 1_700_000_000_123, Member: "a"}, redis.Z{Score: 5, Member: "b"})
	rdb.ZAdd(ctx, promo.ExpiringKey(holds), redis.Z{Score: 9, Member: "late"})
	for _, c := range []struct {
		rid      string
		want     HoldLift
		deadline int64
	}{{"a", HoldLifted, 1_700_000_000_123}, {"a", HoldConfirming, 1_700_000_000_123}, {"late", HoldExpiring, 0}, {"none", HoldNone, 0}} {
		if got, deadline, err := lift(c.rid); err != nil || got != c.want || deadline != c.deadline {
			t.Fatalf("lift %s: %v %d %v, want %v %d", c.rid, got, deadline, err, c.want, c.deadline)
		}
	}
	if err := rdb.ZScore(ctx, holds, "a").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("a lifted hold is still where expiry finds it: %v", err)
	}
	if n := restore("a"); n != 1 || rdb.ZScore(ctx, holds, "a").Val() != 1_700_000_000_123 || rdb.ZCard(ctx, promo.ConfirmingKey(holds)).Val() != 0 {
		t.Fatalf("restore: %d; the hold must be back at its deadline and out of confirming", n)
	}
	// Lifted, then an acknowledged confirm takes it out of confirming: a restore
	// (the other confirm's failure) must not put it back.
	if got, _, _ := lift("b"); got != HoldLifted {
		t.Fatalf("lift b: %v", got)
	}
	rdb.ZRem(ctx, promo.ConfirmingKey(holds), "b")
	if n := restore("b"); n != 0 || rdb.ZScore(ctx, holds, "b").Err() == nil {
		t.Fatalf("restore after an acknowledged confirm put the hold back (%d)", n)
	}
	bad := runCmd(t, func(p redis.Pipeliner) *redis.Cmd {
		return confirmHoldScript.EvalSha(ctx, p, []string{holds, promo.ConfirmingKey(holds), promo.ExpiringKey(holds)}, "drop", "a")
	})
	if bad.Err() == nil || rdb.ZScore(ctx, holds, "a").Err() != nil {
		t.Fatalf("an unknown step: %v; it must raise and change nothing", bad.Err())
	}
}
