package grab

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

// A flood of calls on one shard is coalesced into pipelines, none longer than
// maxBatch (a script storm in one event-loop cycle stalls the whole shard), and
// every call gets its own reply.
func TestShardExecCoalescesWithinMaxBatch(t *testing.T) {
	t.Parallel()
	const calls, maxBatch = 200, 4
	c := testenv.StartRedis(t, testenv.Volatile).Client()
	reg := prometheus.NewRegistry()
	e := newShardExec(0, c, execConfig{workers: 1, maxBatch: maxBatch, queue: calls, timeout: 5 * time.Second}, NewMetrics(reg))
	defer e.close()

	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := e.do(context.Background(), func(p redis.Pipeliner) *redis.Cmd { return p.Do(context.Background(), "echo", i) })
			if v, err := cmd.Int(); err != nil || v != i {
				t.Errorf("call %d answered %v, %v", i, v, err)
			}
		}()
	}
	wg.Wait()

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "flashsale_grab_redis_pipeline_calls" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		var withinMax uint64
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == maxBatch {
				withinMax = b.GetCumulativeCount()
			}
		}
		if h.GetSampleSum() != calls || withinMax != h.GetSampleCount() || h.GetSampleCount() >= calls {
			t.Fatalf("%v calls in %d pipelines, %d of them of at most %d calls: want %d calls, all within %d, coalesced into fewer pipelines than calls",
				h.GetSampleSum(), h.GetSampleCount(), withinMax, maxBatch, calls, maxBatch)
		}
		return
	}
	t.Fatal("no flashsale_grab_redis_pipeline_calls metric")
}

// A restarted Redis has lost its scripts: the calls that answered NOSCRIPT are run
// once more after the scripts are loaded, and the calls that did run are not sent
// twice (a grab run twice would take twice and count its rate window twice).
func TestShardExecReloadsScriptsAfterAFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.StartRedis(t, testenv.Volatile).Client()
	const key = "C_flushed_1"
	now := time.Now().UnixMilli()
	if code, err := lua.Create(ctx, c, ring.Default.Shard(key), key, lua.AdminSpec{Ver: 1, Total: 10, MaxPerGrab: 5, RateWindowMs: 1000,
		StartMs: now - 60_000, EndMs: now + 3_600_000, State: "ACTIVE"}); err != nil || code != lua.AdminOK {
		t.Fatalf("create: %v %v", code, err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	e := newShardExec(0, c, execConfig{workers: 1, maxBatch: 8, queue: 8, timeout: 5 * time.Second}, NewMetrics(prometheus.NewRegistry()))
	defer e.close()

	var wg sync.WaitGroup
	var grab, incr *redis.Cmd
	wg.Add(2)
	go func() { // in the same pipeline as the grab, or the one before: both must hold
		defer wg.Done()
		incr = e.do(ctx, func(p redis.Pipeliner) *redis.Cmd { return p.Do(ctx, "incr", "ran") })
	}()
	go func() {
		defer wg.Done()
		call := lua.GrabCall{NowMs: now, DeadlineMs: now + 5000, RequestID: "r1", BodyHash: "h", Pin: "p", IP: "1.1.1.1",
			RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 2}}}
		grab = e.do(ctx, func(p redis.Pipeliner) *redis.Cmd { return lua.QueueGrab(ctx, p, call) })
	}()
	wg.Wait()
	if r, err := lua.ParseGrab(grab); err != nil || r.Code != lua.CodeOK || r.Remaining[0] != 8 {
		t.Fatalf("grab after SCRIPT FLUSH: %+v %v, want OK with 8 left", r, err)
	}
	if n, err := incr.Int(); err != nil || n != 1 || c.Get(ctx, "ran").Val() != "1" {
		t.Fatalf("the INCR that ran was sent again: %d %v, stored %s", n, err, c.Get(ctx, "ran").Val())
	}
	if h, _, err := lua.ReadHash(ctx, c, key); err != nil || h.Remaining != 8 {
		t.Fatalf("remaining %d (%v): the grab ran twice or not at all", h.Remaining, err)
	}
}

// The commits a pipeline carries are one commit.lua call, and each still gets its
// own answer: committed, not found, or returned, as in a call of its own. A flushed
// script cache is loaded again for them as for any call.
func TestShardExecCommitsInOneCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.StartRedis(t, testenv.Volatile).Client()
	const key, grabs, maxBatch = "C_batched_1", 40, 16
	now := time.Now().UnixMilli()
	createOpen(t, c, now, key)
	want := map[string]lua.CommitCode{"never-taken": lua.CommitNotFound}
	for i := range grabs {
		rid := fmt.Sprint("r", i)
		if r, err := lua.Grab(ctx, c, lua.GrabCall{NowMs: now, DeadlineMs: now + 60_000, RequestID: rid, BodyHash: "h",
			Pin: rid, IP: "1.1.1.1", RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}); err != nil || r.Code != lua.CodeOK {
			t.Fatalf("grab %s: %+v %v", rid, r, err)
		}
		want[rid] = lua.CommitCommitted
	}
	if r, err := lua.Return(ctx, c, lua.ReturnCall{RequestID: "r7", Pin: "r7", Mode: lua.ReturnAbort, NowMs: now, Keys: []string{key}}); err != nil || r.Code != lua.ReturnReturned {
		t.Fatalf("abort r7: %+v %v", r, err)
	}
	want["r7"] = lua.CommitReturned
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	c.ConfigResetStat(ctx)

	// No worker runs until every commit is queued, so the pipelines are full ones.
	e := newShardExec(0, c, execConfig{workers: 0, maxBatch: maxBatch, queue: len(want), timeout: 5 * time.Second}, NewMetrics(prometheus.NewRegistry()))
	defer e.close()
	var wg sync.WaitGroup
	for rid, code := range want {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if have, err := e.commit(ctx, lua.CommitCall{RequestID: rid, Keys: []string{key}}); err != nil || have != code {
				t.Errorf("commit %s: %v %v, want %v", rid, have, err, code)
			}
		}()
	}
	for len(e.jobs) < len(want) {
		time.Sleep(time.Millisecond)
	}
	go e.loop()
	wg.Wait()

	pipelines := (len(want) + maxBatch - 1) / maxBatch
	// One call per pipeline, and the first pipeline's twice: answered NOSCRIPT,
	// then run once the scripts are loaded again.
	if calls := testenv.CommandCalls(t, c); calls["evalsha"] != int64(pipelines+1) {
		t.Fatalf("%d commits in %d EVALSHA calls, want %d: %v", len(want), calls["evalsha"], pipelines+1, calls)
	}
	// Left pending: only the abort, which waits for its record (return.lua).
	if pending := c.ZRange(ctx, promo.Keys(key)[4], 0, -1).Val(); !slices.Equal(pending, []string{"r7"}) {
		t.Fatalf("pending after the commits: %v, want the aborted r7 alone", pending)
	}
}

// The commits of a pipeline ride a take of the same promotion in it, so the
// pipeline makes no commit.lua call for them; a commit with no such take, and
// those a malformed take (never sent) would have carried, join one commit.lua
// call. Each call still gets its own answer, and a flushed script cache is
// loaded again for the take and its riders together.
func TestShardExecCommitsRideTakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.StartRedis(t, testenv.Volatile).Client()
	now := time.Now().UnixMilli()
	const a, b = "C_ridden_1", "C_alone_1"
	createOpen(t, c, now, a, b)
	grab := func(rid, key string, num int64) lua.GrabCall { return takeCall(now, rid, key, num) }
	type commit struct {
		rid, key string
		want     lua.CommitCode
	}
	commits := []commit{{"never-taken", a, lua.CommitNotFound}, {"rb", b, lua.CommitCommitted}}
	for i := range 6 {
		commits = append(commits, commit{fmt.Sprint("r", i), a, lua.CommitCommitted})
	}
	for _, cm := range commits[1:] {
		if r, err := lua.Grab(ctx, c, grab(cm.rid, cm.key, 1)); err != nil || r.Code != lua.CodeOK {
			t.Fatalf("grab %s: %+v %v", cm.rid, r, err)
		}
	}
	if r, err := lua.Return(ctx, c, lua.ReturnCall{RequestID: "r5", Pin: "r5", Mode: lua.ReturnAbort, NowMs: now, Keys: []string{a}}); err != nil || r.Code != lua.ReturnReturned {
		t.Fatalf("abort r5: %+v %v", r, err)
	}
	commits[len(commits)-1].want = lua.CommitReturned
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	c.ConfigResetStat(ctx)

	// No worker runs until every call is queued, in this order, so they share one
	// pipeline: a malformed take first (the first of its promotion, so the one the
	// commits would ride), then three takes of a, then the commits.
	e := newShardExec(0, c, execConfig{workers: 0, maxBatch: 64, queue: 64, timeout: 5 * time.Second}, NewMetrics(prometheus.NewRegistry()))
	defer e.close()
	var wg sync.WaitGroup
	queue := func(f func()) {
		n := len(e.jobs)
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
		for len(e.jobs) == n {
			time.Sleep(100 * time.Microsecond)
		}
	}
	queue(func() {
		if _, err := lua.ParseGrab(e.take(ctx, grab("bad", a, 0))); err == nil {
			t.Error("a take of 0 units was sent")
		}
	})
	left := make([]int64, 3)
	for i := range left {
		queue(func() {
			r, err := lua.ParseGrab(e.take(ctx, grab(fmt.Sprint("t", i), a, 1)))
			if err != nil || r.Code != lua.CodeOK {
				t.Errorf("take t%d: %+v %v", i, r, err)
				return
			}
			left[i] = r.Remaining[0]
		})
	}
	for _, cm := range commits {
		queue(func() {
			if have, err := e.commit(ctx, lua.CommitCall{RequestID: cm.rid, Keys: []string{cm.key}}); err != nil || have != cm.want {
				t.Errorf("commit %s: %v %v, want %v", cm.rid, have, err, cm.want)
			}
		})
	}
	go e.loop()
	wg.Wait()

	// The three takes (the first carrying the commits of a) and one commit.lua
	// (b's commit, and those of a the malformed take left), twice: answered
	// NOSCRIPT, then run once the scripts are loaded again.
	if calls := testenv.CommandCalls(t, c); calls["evalsha"] != 2*4 {
		t.Fatalf("%d EVALSHA calls, want %d: %v", calls["evalsha"], 2*4, calls)
	}
	if slices.Sort(left); !slices.Equal(left, []int64{92, 93, 94}) {
		t.Fatalf("the takes left %v, want 94, 93, 92 in some order (95 after the abort)", left)
	}
	pending := c.ZRange(ctx, promo.Keys(a)[4], 0, -1).Val()
	slices.Sort(pending)
	if !slices.Equal(pending, []string{"r5", "t0", "t1", "t2"}) {
		t.Fatalf("pending after the commits: %v, want the aborted r5 and the three new takes", pending)
	}

	// A second pipeline of well-formed takes: the commits of the first three ride
	// the first of them, and no commit.lua call is made.
	c.ConfigResetStat(ctx)
	e2 := newShardExec(0, c, execConfig{workers: 0, maxBatch: 64, queue: 64, timeout: 5 * time.Second}, NewMetrics(prometheus.NewRegistry()))
	defer e2.close()
	e = e2
	for i := 3; i < 6; i++ {
		queue(func() {
			if r, err := lua.ParseGrab(e2.take(ctx, grab(fmt.Sprint("t", i), a, 1))); err != nil || r.Code != lua.CodeOK {
				t.Errorf("take t%d: %+v %v", i, r, err)
			}
		})
	}
	for i := range 3 {
		queue(func() {
			if have, err := e2.commit(ctx, lua.CommitCall{RequestID: fmt.Sprint("t", i), Keys: []string{a}}); err != nil || have != lua.CommitCommitted {
				t.Errorf("commit t%d: %v %v", i, have, err)
			}
		})
	}
	go e2.loop()
	wg.Wait()
	if calls := testenv.CommandCalls(t, c); calls["evalsha"] != 3 {
		t.Fatalf("%d EVALSHA calls for three takes carrying three commits, want 3: %v", calls["evalsha"], calls)
	}
	pending = c.ZRange(ctx, promo.Keys(a)[4], 0, -1).Val()
	slices.Sort(pending)
	if !slices.Equal(pending, []string{"r5", "t3", "t4", "t5"}) {
		t.Fatalf("pending after the riding commits: %v, want r5 and the three new takes", pending)
	}
}

// With a linger, commits that find no take wait for one: a take of their
// promotion carries them, in its one call, and the others stay parked until the
// linger ends, then go in one commit.lua call.
func TestShardExecCommitsWaitForATake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.StartRedis(t, testenv.Volatile).Client()
	now := time.Now().UnixMilli()
	const a, b = "C_waited_1", "C_lonely_1"
	createOpen(t, c, now, a, b)
	grab := func(rid, key string) lua.GrabCall { return takeCall(now, rid, key, 1) }
	rids := map[string]string{"r0": a, "r1": a, "r2": a, "rb": b}
	for rid, key := range rids {
		if r, err := lua.Grab(ctx, c, grab(rid, key)); err != nil || r.Code != lua.CodeOK {
			t.Fatalf("grab %s: %+v %v", rid, r, err)
		}
	}
	if err := lua.Load(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.ConfigResetStat(ctx)

	// A linger far longer than the test: only a take, or the executor's close,
	// sends these commits.
	e := newShardExec(0, c, execConfig{workers: 1, maxBatch: 64, queue: 64, timeout: 5 * time.Second, linger: time.Hour}, NewMetrics(prometheus.NewRegistry()))
	var wa, wb sync.WaitGroup
	for rid, key := range rids {
		wg := &wa
		if key == b {
			wg = &wb
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if have, err := e.commit(ctx, lua.CommitCall{RequestID: rid, Keys: []string{key}}); err != nil || have != lua.CommitCommitted {
				t.Errorf("commit %s: %v %v", rid, have, err)
			}
		}()
	}
	for parked := 0; parked < len(rids); time.Sleep(time.Millisecond) {
		e.parked.mu.Lock()
		parked = len(e.parked.jobs)
		e.parked.mu.Unlock()
	}
	if calls := testenv.CommandCalls(t, c); calls["evalsha"] != 0 {
		t.Fatalf("parked commits made %d EVALSHA calls, want none before a take: %v", calls["evalsha"], calls)
	}
	if r, err := lua.ParseGrab(e.take(ctx, grab("t0", a))); err != nil || r.Code != lua.CodeOK || r.Remaining[0] != 96 {
		t.Fatalf("take t0: %+v %v, want OK with 96 left", r, err)
	}
	wa.Wait()
	if calls := testenv.CommandCalls(t, c); calls["evalsha"] != 1 {
		t.Fatalf("a take carrying three parked commits made %d EVALSHA calls, want 1: %v", calls["evalsha"], calls)
	}
	if pending := c.ZRange(ctx, promo.Keys(a)[4], 0, -1).Val(); !slices.Equal(pending, []string{"t0"}) {
		t.Fatalf("pending on %s: %v, want the new take t0 alone", a, pending)
	}
	if pending := c.ZRange(ctx, promo.Keys(b)[4], 0, -1).Val(); !slices.Equal(pending, []string{"rb"}) {
		t.Fatalf("pending on %s: %v, want rb, whose commit has no take to ride yet", b, pending)
	}
	e.close() // runs what is parked
	wb.Wait()
	if pending := c.ZCard(ctx, promo.Keys(b)[4]).Val(); pending != 0 {
		t.Fatalf("%d pending on %s after the close, want rb committed", pending, b)
	}

	// A short linger with no take coming: the commit goes alone when it ends.
	e2 := newShardExec(0, c, execConfig{workers: 1, maxBatch: 64, queue: 64, timeout: 5 * time.Second, linger: time.Millisecond}, NewMetrics(prometheus.NewRegistry()))
	defer e2.close()
	if have, err := e2.commit(ctx, lua.CommitCall{RequestID: "t0", Keys: []string{a}}); err != nil || have != lua.CommitCommitted {
		t.Fatalf("commit t0 alone: %v %v", have, err)
	}
}

// createOpen creates promotions of 100 units, at most one a grab, on sale now.
func createOpen(t *testing.T, c redis.UniversalClient, now int64, keys ...string) {
	t.Helper()
	for _, key := range keys {
		if code, err := lua.Create(context.Background(), c, ring.Default.Shard(key), key, lua.AdminSpec{Ver: 1, Total: 100, MaxPerGrab: 1,
			StartMs: now - 60_000, EndMs: now + 3_600_000, State: "ACTIVE"}); err != nil || code != lua.AdminOK {
			t.Fatalf("create %s: %v %v", key, code, err)
		}
	}
}

// takeCall is a take of num units of key by a buyer named after the requestId.
func takeCall(now int64, rid, key string, num int64) lua.GrabCall {
	return lua.GrabCall{NowMs: now, DeadlineMs: now + 60_000, RequestID: rid, BodyHash: "h",
		Pin: rid, IP: "1.1.1.1", RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: num}}}
}
