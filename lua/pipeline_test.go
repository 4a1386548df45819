package lua

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// Script.Run falls back to EVAL when the cache was flushed.
func TestGrabAfterScriptFlush(t *testing.T) {
	ctx := context.Background()
	k := promoKey(t, "k")
	mustCreate(t, k, baseSpec())
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if r := mustGrab(t, grabCall("r1", "p1", "ip", item(k, 1))); r.Code != CodeOK {
		t.Fatalf("have %+v", r)
	}
	if err := Load(ctx, rdb); err != nil {
		t.Fatal(err)
	}
}

func TestIsNoScript(t *testing.T) {
	t.Parallel()
	err := rdb.EvalSha(context.Background(), "0000000000000000000000000000000000000000", nil).Err()
	if !IsNoScript(err) {
		t.Fatalf("EVALSHA of an unknown digest: %v", err)
	}
	if !IsNoScript(redis.ErrNoScript) || !IsNoScript(errors.Join(errors.New("x"), redis.ErrNoScript)) {
		t.Fatal("wrapped NOSCRIPT not recognised")
	}
	if IsNoScript(nil) || IsNoScript(errors.New("NOSCRIPT but not from redis")) || IsNoScript(redis.Nil) {
		t.Fatal("false positive")
	}
}

func TestReadHash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := promoKey(t, "k")
	if _, found, err := ReadHash(ctx, rdb, k); found || err != nil {
		t.Fatalf("missing: found=%v err=%v", found, err)
	}
	s := specV(7, func(s *AdminSpec) { s.PerPin, s.PerIP, s.RateLimit, s.RateWindowMs = 1, 2, 3, 4000 })
	mustCreate(t, k, s)
	if h := mustHash(t, k); h != hashOf(s) || h.Granted() != 0 {
		t.Fatalf("have %+v", h)
	}
	rdb.HSet(ctx, k, "remaining", "x")
	if _, _, err := ReadHash(ctx, rdb, k); err == nil {
		t.Fatal("bad integer accepted")
	}
}
