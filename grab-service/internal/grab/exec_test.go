package grab

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
	e := newShardExec(0, c, 1, maxBatch, calls, 5*time.Second, NewMetrics(reg))
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
	e := newShardExec(0, c, 1, 8, 8, 5*time.Second, NewMetrics(prometheus.NewRegistry()))
	defer e.close()

	var wg sync.WaitGroup
	var incr *redis.Cmd
	grabs := make([]*redis.Cmd, 3)
	wg.Add(1 + len(grabs))
	go func() { // in the same pipeline as the grabs, or the one before: both must hold
		defer wg.Done()
		incr = e.do(ctx, func(p redis.Pipeliner) *redis.Cmd { return p.Do(ctx, "incr", "ran") })
	}()
	for i := range grabs { // alone, or several in one EVALSHA of the batch form
		go func() {
			defer wg.Done()
			call := lua.GrabCall{NowMs: now, DeadlineMs: now + 5000, RequestID: fmt.Sprint("r", i), BodyHash: "h", Pin: fmt.Sprint("p", i), IP: "1.1.1.1",
				RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 2}}}
			grabs[i] = e.call(ctx, lua.GrabOf(call))
		}()
	}
	wg.Wait()
	for i, grab := range grabs {
		if r, err := lua.ParseGrab(grab); err != nil || r.Code != lua.CodeOK {
			t.Fatalf("grab %d after SCRIPT FLUSH: %+v %v, want OK", i, r, err)
		}
	}
	if n, err := incr.Int(); err != nil || n != 1 || c.Get(ctx, "ran").Val() != "1" {
		t.Fatalf("the INCR that ran was sent again: %d %v, stored %s", n, err, c.Get(ctx, "ran").Val())
	}
	if h, _, err := lua.ReadHash(ctx, c, key); err != nil || h.Remaining != 10-2*int64(len(grabs)) {
		t.Fatalf("remaining %d (%v) after %d grabs of 2: a grab ran twice or not at all", h.Remaining, err, len(grabs))
	}
}

// Grabs and commits sent at once share script calls (one EVALSHA per script per
// pipeline), and each still gets its own answer: 200 buyers at 50 units sell
// exactly 50, each remaining figure once, and every grant commits.
func TestShardExecBatchesScriptCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.StartRedis(t, testenv.Volatile).Client()
	const key, buyers, stock = "C_batched_1", 200, 50
	now := time.Now().UnixMilli()
	if code, err := lua.Create(ctx, c, ring.Default.Shard(key), key, lua.AdminSpec{Ver: 1, Total: stock, MaxPerGrab: 1, RateWindowMs: 1000,
		StartMs: now - 60_000, EndMs: now + 3_600_000, State: "ACTIVE"}); err != nil || code != lua.AdminOK {
		t.Fatalf("create: %v %v", code, err)
	}
	if err := lua.Load(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	e := newShardExec(0, c, 2, 64, buyers, 5*time.Second, NewMetrics(prometheus.NewRegistry()))
	defer e.close()

	var mu sync.Mutex
	seen := map[int64]bool{}
	soldOut := 0
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rid := fmt.Sprint("r", i)
			call := lua.GrabCall{NowMs: now, DeadlineMs: now + 5000, RequestID: rid, BodyHash: "h", Pin: fmt.Sprint("p", i), IP: "1.1.1.1",
				RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}
			r, err := lua.ParseGrab(e.call(ctx, lua.GrabOf(call)))
			if err != nil {
				t.Errorf("grab %s: %v", rid, err)
				return
			}
			mu.Lock()
			dup := r.Code == lua.CodeOK && seen[r.Remaining[0]]
			switch {
			case r.Code == lua.CodeSoldOut:
				soldOut++
			case r.Code == lua.CodeOK && !dup:
				seen[r.Remaining[0]] = true
			}
			mu.Unlock()
			if r.Code != lua.CodeOK || dup {
				if r.Code != lua.CodeSoldOut || dup {
					t.Errorf("grab %s: %+v (a remaining figure answered twice: %v)", rid, r, dup)
				}
				return
			}
			if code, err := lua.ParseCommit(e.call(ctx, lua.CommitOf(rid, []string{key}))); err != nil || code != lua.CommitCommitted {
				t.Errorf("commit %s: %v %v", rid, code, err)
			}
		}()
	}
	wg.Wait()
	if len(seen) != stock || soldOut != buyers-stock {
		t.Fatalf("%d granted, %d sold out: want %d and %d", len(seen), soldOut, stock, buyers-stock)
	}
	if n := c.ZCard(ctx, promo.PendingKey(key)).Val(); n != 0 {
		t.Fatalf("%d takes left pending after their commits", n)
	}
	stats := c.Info(ctx, "commandstats").Val()
	evals := 0
	for _, line := range strings.Split(stats, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
			evals, _ = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		}
	}
	if evals == 0 || evals >= buyers+stock {
		t.Fatalf("%d EVALSHA for %d grabs and %d commits: want fewer script calls than calls (batched)", evals, buyers, stock)
	}
	t.Logf("%d grabs and %d commits in %d EVALSHA", buyers, stock, evals)
}
