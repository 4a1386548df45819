package bucket

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/expiry"
	"github.com/flashsale/platform/internal/fanout"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/lua"
)

// Grabber takes units of bucketed promotions on the shards: the pin's home bucket
// first, then donors, each attempt all parts or none.
type Grabber struct {
	Shards []redis.UniversalClient // by logical shard
	Ring   *ring.Ring
	// EmptyTTL is how long a bucket that answered SOLD_OUT is skipped as a donor
	// (as grab-service's refusal cache); a cancel may refill it meanwhile, which
	// costs at most a late SOLD_OUT, never a broken limit.
	EmptyTTL time.Duration

	once  sync.Once
	empty *expiry.Map[struct{}] // bucket keys that answered SOLD_OUT
	next  atomic.Uint32         // donor round robin
	// ipLimited holds the promotions found to have an ip limit (promotion key):
	// their grabs always carry an ip part. The others leave it out when it would
	// cost a shard of its own, until q.lua answers that they may not. Forgetting
	// one costs one more attempt (q.lua answers IP_PART_NEEDED again), so it is
	// bounded like the refusals, in number and in age.
	ipLimited *expiry.Map[struct{}]
}

// Bounds of the Grabber's memory: its maps are keyed by the promotions requests
// name, so they must not grow with what clients send.
const (
	// emptySize holds the sold-out buckets of a sale's bucketed promotions: a few
	// hundred promotions of up to Max buckets each, with a margin.
	emptySize = 1 << 14
	// ipLimitedSize holds the bucketed promotions with an ip limit, with a margin.
	ipLimitedSize = 1 << 12
	// ipLimitedTTL is how long a promotion is known to have an ip limit: its limit
	// can be taken off by a patch, and a deleted promotion's entry must go.
	ipLimitedTTL = 10 * time.Minute
)

func (g *Grabber) init() {
	g.once.Do(func() {
		g.empty = expiry.New[struct{}](emptySize, g.EmptyTTL)
		g.ipLimited = expiry.New[struct{}](ipLimitedSize, ipLimitedTTL)
	})
}

// Request is one bucketed grab of Num units of the promotion hash Key.
type Request struct {
	Key                 string
	Buckets             int
	RequestID, BodyHash string
	Pin, IP             string
	Num                 int64
	Now, Deadline       time.Time
	RateFactorPermille  int64
}

// Reply is a grab's answer: Code OK with the bucket the units came from, or the
// refusal (SOLD_OUT once every bucket is); Tries counts the attempts on Redis.
type Reply struct {
	Code        lua.Code
	Stock       int
	Tries       int
	LedgerState string // DUPLICATE only
}

// Grab takes the units, committing every part once all are taken. An error means a
// shard failed: what was taken elsewhere is given back, and a part left pending on
// the failed shard is the reconciler's, as for an ordinary grab.
func (g *Grabber) Grab(ctx context.Context, req Request) (Reply, error) {
	if req.Buckets < 1 || req.Buckets > Max {
		return Reply{}, fmt.Errorf("grab %s: %d buckets, want 1..%d", req.RequestID, req.Buckets, Max)
	}
	g.init()
	keys := Keys(g.Ring, req.Key, req.Buckets)
	pinHome, ipHome := Home(req.Pin, req.Buckets), Home(req.IP, req.Buckets)
	tried := make([]bool, req.Buckets)
	var out Reply
	for stock := pinHome; stock >= 0; stock = g.donor(tried) {
		tried[stock] = true
		if g.knownEmpty(keys[stock], req.Now) {
			continue
		}
		out.Tries++
		_, limited := g.ipLimited.Get(req.Key, req.Now)
		code, state, err := g.attempt(ctx, req, keys, Plan(stock, pinHome, ipHome, limited))
		if err == nil && code == lua.CodeIPPartNeeded {
			g.ipLimited.Put(req.Key, struct{}{}, req.Now)
			out.Tries++
			code, state, err = g.attempt(ctx, req, keys, Plan(stock, pinHome, ipHome, true))
		}
		switch {
		case err != nil:
			return out, err
		case code == lua.CodeSoldOut:
			g.empty.Put(keys[stock], struct{}{}, req.Now)
			continue
		}
		out.Code, out.Stock, out.LedgerState = code, stock, state
		return out, nil
	}
	out.Code = lua.CodeSoldOut
	return out, nil
}

// donor is the next bucket to take stock from, round robin over those not yet
// tried (Grab skips the known empty), -1 when every bucket was tried.
func (g *Grabber) donor(tried []bool) int {
	start := int(g.next.Add(1))
	for i := range tried {
		if b := (start + i) % len(tried); !tried[b] {
			return b
		}
	}
	return -1
}

// shardCall is the parts of one attempt that live on one shard.
type shardCall struct {
	shard int
	keys  []string
	call  lua.GrabCall
}

// attempt takes the parts on their shards in parallel and commits them, or gives
// back what it took. The code is OK, or the refusal that decided the attempt: any
// refusal but SOLD_OUT wins, as falling over to a donor cannot change it.
func (g *Grabber) attempt(ctx context.Context, req Request, keys []string, parts []Part) (lua.Code, string, error) {
	calls := g.shardCalls(req, keys, parts)
	replies := make([]lua.GrabReply, len(calls))
	errs := make([]error, len(calls))
	fanout.Each(calls, func(i int, c shardCall) {
		replies[i], errs[i] = lua.Grab(ctx, g.Shards[c.shard], c.call)
	})
	var took []shardCall
	code, state := lua.CodeOK, ""
	var failed error
	for i, r := range replies {
		switch {
		case errs[i] != nil:
			failed = errors.Join(failed, fmt.Errorf("grab %s on shard %d: %w", req.RequestID, calls[i].shard, errs[i]))
		case r.Code == lua.CodeOK:
			took = append(took, calls[i])
		case code == lua.CodeOK || code == lua.CodeSoldOut:
			code, state = r.Code, r.LedgerState
		}
	}
	if failed != nil || code != lua.CodeOK {
		g.settle(req, took, lua.ReturnUndo)
		return code, state, failed
	}
	if err := g.commit(ctx, req, calls); err != nil {
		g.settle(req, calls, lua.ReturnAbort)
		return code, "", err
	}
	return lua.CodeOK, "", nil
}

func (g *Grabber) shardCalls(req Request, keys []string, parts []Part) []shardCall {
	var calls []shardCall
	for _, p := range parts {
		key := keys[p.Bucket]
		shard := g.Ring.Shard(key)
		i := 0
		for i < len(calls) && calls[i].shard != shard {
			i++
		}
		if i == len(calls) {
			calls = append(calls, shardCall{shard: shard, call: lua.GrabCall{
				NowMs: req.Now.UnixMilli(), DeadlineMs: req.Deadline.UnixMilli(),
				RequestID: req.RequestID, BodyHash: req.BodyHash, Pin: req.Pin, IP: req.IP,
				RateFactorPermille: req.RateFactorPermille}})
		}
		calls[i].keys = append(calls[i].keys, key)
		calls[i].call.Items = append(calls[i].call.Items, lua.GrabItem{Key: key, Num: req.Num, Part: cmp.Or(p.Letters, lua.PartAll), Buckets: req.Buckets})
	}
	return calls
}

func (g *Grabber) commit(ctx context.Context, req Request, calls []shardCall) error {
	errs := make([]error, len(calls))
	fanout.Each(calls, func(i int, c shardCall) {
		code, err := lua.Commit(ctx, g.Shards[c.shard], req.RequestID, c.keys)
		if err == nil && code != lua.CommitCommitted {
			err = fmt.Errorf("commit refused: %s", code)
		}
		if err != nil {
			errs[i] = fmt.Errorf("commit %s on shard %d: %w", req.RequestID, c.shard, err)
		}
	})
	return errors.Join(errs...)
}

// settle gives back the parts of a failed attempt: undo when nothing was
// committed, abort when a commit may have landed (a committed part is then
// cancelled). Failures are left to the reconciler, whose deadline covers them.
func (g *Grabber) settle(req Request, calls []shardCall, mode lua.ReturnMode) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	fanout.Each(calls, func(_ int, c shardCall) {
		call := lua.ReturnCall{RequestID: req.RequestID, Pin: req.Pin, Mode: mode, NowMs: req.Now.UnixMilli(), Keys: c.keys}
		r, err := lua.Return(ctx, g.Shards[c.shard], call)
		if err == nil && r.Code == lua.ReturnCommitted {
			call.Mode, call.Reason = lua.ReturnCancel, "ROLLBACK"
			_, _ = lua.Return(ctx, g.Shards[c.shard], call)
		}
	})
}

func (g *Grabber) knownEmpty(key string, now time.Time) bool {
	_, ok := g.empty.Get(key, now)
	return ok
}
