package lua

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// batchOp is one grab or commit, naming promotions by index so that the same
// sequence can run in two worlds of promotions.
type batchOp struct {
	commit    bool
	rid, body string
	pin, ip   string
	promos    []int
	nums      []int64
	nowMs     int64
}

func (o batchOp) call(keys []string) Call {
	ks := make([]string, len(o.promos))
	for i, p := range o.promos {
		ks[i] = keys[p]
	}
	if o.commit {
		return CommitOf(o.rid, ks)
	}
	c := GrabCall{NowMs: o.nowMs, DeadlineMs: o.nowMs + 5000, RequestID: o.rid, BodyHash: o.body,
		Pin: o.pin, IP: o.ip, RateFactorPermille: 1000}
	for i, k := range ks {
		c.Items = append(c.Items, GrabItem{Key: k, Num: o.nums[i]})
	}
	return GrabOf(c)
}

// answer is a reply as the caller reads it; errors compare by presence only (the
// line numbers in a script error differ between a call and its batch form).
func answer(o batchOp, cmd *redis.Cmd) string {
	if cmd.Err() != nil {
		return "error ERROR"
	}
	if o.commit {
		code, err := ParseCommit(cmd)
		return fmt.Sprintf("commit %v %v", code, err)
	}
	r, err := ParseGrab(cmd)
	return fmt.Sprintf("grab %v %+v %v", r.Code, r, err)
}

// randomOps is a sale in miniature: grabs by a few pins and ips (so the per-pin,
// per-ip and rate limits bind), reused requestIds (replays and another body),
// commits of taken and untaken requests, and malformed calls (a promotion listed
// twice raises a script error; num 0 is refused before it is sent).
func randomOps(r *rand.Rand, n, promos int) []batchOp {
	ops := make([]batchOp, n)
	for i := range ops {
		rid := fmt.Sprintf("r%d", r.IntN(n/2))
		o := batchOp{rid: rid, body: "h-" + rid, pin: fmt.Sprintf("p%d", r.IntN(12)), ip: fmt.Sprintf("ip%d", r.IntN(4)),
			nowMs: now + int64(i)*7}
		if r.IntN(10) == 0 {
			o.body += "-other"
		}
		for _, p := range r.Perm(promos)[:1+r.IntN(2)] {
			o.promos = append(o.promos, p)
			o.nums = append(o.nums, int64(1+r.IntN(3)))
		}
		switch r.IntN(20) {
		case 0:
			o.promos = append(o.promos, o.promos[0])
			o.nums = append(o.nums, 1)
		case 1:
			o.nums[0] = 0
		}
		o.commit = r.IntN(3) == 0
		ops[i] = o
	}
	return ops
}

// worldState is everything the scripts write for the promotions of keys.
func worldState(t *testing.T, keys []string) []string {
	ctx := context.Background()
	var out []string
	for _, k := range keys {
		pk := promo.Keys(k)
		h, _ := rdb.HGetAll(ctx, pk[0]).Result()
		delete(h, "key") // names the world
		pins, _ := rdb.HGetAll(ctx, pk[1]).Result()
		ips, _ := rdb.HGetAll(ctx, pk[2]).Result()
		req, _ := rdb.HGetAll(ctx, pk[3]).Result()
		pending, err := rdb.ZRangeWithScores(ctx, pk[4], 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(h, pins, ips, req, pending))
	}
	return out
}

// Calls sharing one EVALSHA of the batch form answer and write exactly what the
// same calls sent one by one do, malformed calls included (they fail alone).
func TestBatchAnswersAsCallsOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seen := map[string]bool{}
	for seed := uint64(1); seed <= 8; seed++ {
		r := rand.New(rand.NewPCG(seed, 20))
		worlds := [2][]string{}
		for w := range worlds {
			for p := 0; p < 4; p++ {
				k := promoKey(t, fmt.Sprintf("s%d-w%d-p%d", seed, w, p))
				worlds[w] = append(worlds[w], k)
				spec := baseSpec()
				spec.Total, spec.PerPin, spec.PerIP, spec.MaxPerGrab = 12, 4, 3, 2
				spec.RateLimit, spec.RateWindowMs = 8, 500
				switch p {
				case 2:
					spec.State = "STOPPED"
				case 3:
					continue // NOT_FOUND
				}
				mustCreate(t, k, spec)
			}
		}
		ops := randomOps(r, 300, 4)

		alone := make([]string, len(ops))
		for i, o := range ops {
			p := rdb.Pipeline()
			cmds, split := QueueCalls(ctx, p, []Call{o.call(worlds[0])})
			_, _ = p.Exec(ctx)
			split()
			alone[i] = answer(o, cmds[0])
		}
		batched := make([]string, 0, len(ops))
		for i := 0; i < len(ops); {
			// A batch holds calls of one script: calls of two scripts in one
			// pipeline run script by script (their callers are concurrent, so
			// any order is theirs), which the calls alone would not reproduce.
			n := 1
			for n < 1+r.IntN(24) && i+n < len(ops) && ops[i+n].commit == ops[i].commit {
				n++
			}
			calls := make([]Call, n)
			for j := range calls {
				calls[j] = ops[i+j].call(worlds[1])
			}
			p := rdb.Pipeline()
			cmds, split := QueueCalls(ctx, p, calls)
			_, _ = p.Exec(ctx)
			split()
			for j, cmd := range cmds {
				batched = append(batched, answer(ops[i+j], cmd))
			}
			i += n
		}
		for i := range ops {
			seen[strings.Fields(batched[i])[1]] = true
			if alone[i] != batched[i] {

				t.Fatalf("seed %d op %d (%+v): alone %s, in a batch %s", seed, i, ops[i], alone[i], batched[i])
			}
		}
		if a, b := worldState(t, worlds[0]), worldState(t, worlds[1]); !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: state after the calls alone\n%v\nafter the batches\n%v", seed, a, b)
		}
	}
	for _, want := range []string{"OK", "DUPLICATE", "REQUEST_ID_REUSED", "NOT_FOUND", "STOPPED", "SOLD_OUT",
		"RATE_LIMITED", "PIN_LIMIT", "IP_LIMIT", "TOO_MANY", "COMMITTED", "ERROR"} {
		if !seen[want] {
			t.Errorf("no call answered %s: the sequences no longer reach every branch (seen %v)", want, seen)
		}
	}
}

// A batch whose script the server lost answers NOSCRIPT for every call, so the
// executor loads the scripts and sends them again (none of them ran).
func TestBatchAfterScriptFlushAnswersNoScript(t *testing.T) {
	ctx := context.Background()
	k := promoKey(t, "k")
	mustCreate(t, k, baseSpec())
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := Load(ctx, rdb); err != nil {
			t.Fatal(err)
		}
	}()
	p := rdb.Pipeline()
	cmds, split := QueueCalls(ctx, p, []Call{GrabOf(grabCall("r1", "p1", "ip", item(k, 1))), GrabOf(grabCall("r2", "p2", "ip", item(k, 1)))})
	_, _ = p.Exec(ctx)
	split()
	for i, cmd := range cmds {
		if !IsNoScript(cmd.Err()) {
			t.Fatalf("call %d after SCRIPT FLUSH: %v, want NOSCRIPT", i, cmd.Err())
		}
	}
	if h := mustHash(t, k); h.Remaining != 10 {
		t.Fatalf("remaining %d after calls that did not run", h.Remaining)
	}
}
