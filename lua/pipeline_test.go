package lua

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// After SCRIPT FLUSH (as after a Redis restart) RunPipeline reloads and answers;
// commands that did run are not sent twice.
func TestRunPipelineAfterScriptFlush(t *testing.T) {
	// Not parallel: SCRIPT FLUSH empties the cache every test shares.
	ctx := context.Background()
	a, b := promoKey(t, "a"), promoKey(t, "b")
	mustCreate(t, a, baseSpec())
	mustCreate(t, b, baseSpec())
	mustGrab(t, grabCall("r0", "p0", "ip0", item(b, 1)))
	counter := promoKey(t, "counter")

	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var grab, commit, ret *redis.Cmd
	var incr *redis.IntCmd
	cmds, err := RunPipeline(ctx, rdb, func(p redis.Pipeliner) {
		incr = p.Incr(ctx, counter)
		grab = QueueGrab(ctx, p, grabCall("r1", "p1", "ip1", item(a, 2)))
		commit = QueueCommit(ctx, p, "r1", []string{a})
		ret = QueueReturn(ctx, p, ReturnCall{RequestID: "r0", Pin: "p0", Mode: ReturnAbort, NowMs: now, Keys: []string{b}})
	})
	if err != nil {
		t.Fatalf("RunPipeline: %v", err)
	}
	if len(cmds) != 4 {
		t.Fatalf("%d cmds", len(cmds))
	}
	if g, err := ParseGrab(grab); err != nil || g.Code != CodeOK || g.Remaining[0] != 8 {
		t.Fatalf("grab %+v %v", g, err)
	}
	if c, err := ParseCommit(commit); err != nil || c != CommitCommitted {
		t.Fatalf("commit %v %v", c, err)
	}
	if r, err := ParseReturn(ret); err != nil || r.Code != ReturnReturned || r.Returned != 1 {
		t.Fatalf("return %+v %v", r, err)
	}
	if incr.Val() != 1 || rdb.Get(ctx, counter).Val() != "1" {
		t.Fatalf("the INCR that ran was sent again: %d %s", incr.Val(), rdb.Get(ctx, counter).Val())
	}
	if h := mustHash(t, a); h.Remaining != 8 {
		t.Fatalf("remaining %d: the grab ran twice or not at all", h.Remaining)
	}
	if e, _ := ledger(t, a, "r1"); e.State != "G" {
		t.Fatalf("ledger %+v", e)
	}
	// The cache is loaded again.
	for _, s := range All() {
		if ok := s.Exists(ctx, rdb).Val(); len(ok) != 1 || !ok[0] {
			t.Fatalf("script %s not loaded", s.Hash())
		}
	}
}

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

// Without NOSCRIPT, RunPipeline returns the first command error as Exec does.
func TestRunPipelineOtherErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := promoKey(t, "k")
	mustCreate(t, k, baseSpec())
	var grab *redis.Cmd
	_, err := RunPipeline(ctx, rdb, func(p redis.Pipeliner) {
		grab = QueueGrab(ctx, p, grabCall("r1", "p1", "ip1", item(k, 1)))
		p.HIncrBy(ctx, k, "state", 1) // WRONGTYPE-like error: state is not an integer
	})
	if err == nil || IsNoScript(err) {
		t.Fatalf("err %v", err)
	}
	if g, err := ParseGrab(grab); err != nil || g.Code != CodeOK {
		t.Fatalf("grab %+v %v", g, err)
	}
	if cmds, err := RunPipeline(ctx, rdb, func(redis.Pipeliner) {}); err != nil || len(cmds) != 0 {
		t.Fatalf("empty pipeline: %v %v", cmds, err)
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
