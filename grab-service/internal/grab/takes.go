package grab

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/flashsale/platform/internal/httpx"

	"github.com/flashsale/platform/internal/fanout"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// take runs one q.lua per shard, shards in parallel; fold, when set, is the claim
// the one shard's call makes with its take (foldsClaim).
func (s *Grabber) take(ctx context.Context, req Request, hash string, gs []group, now, deadline time.Time, factor int64, fold *lua.GrabClaim) ([]lua.GrabReply, []error) {
	replies := make([]lua.GrabReply, len(gs))
	errs := make([]error, len(gs))
	fanout.Each(gs, func(i int, g group) {
		call := lua.GrabCall{
			NowMs: now.UnixMilli(), DeadlineMs: deadline.UnixMilli(),
			RequestID: req.RequestID, BodyHash: hash, Pin: req.Pin, IP: req.IP,
			RateFactorPermille: factor, Outbox: s.cfg.StateOutboxKey, Claim: fold, Channel: req.Channel,
		}
		for k, key := range g.keys {
			it := req.Items[g.idx[k]]
			call.Items = append(call.Items, lua.GrabItem{Key: key, Num: it.Num, Part: g.parts[k], Buckets: bucketsOf(it, g.parts[k])})
		}
		replies[i], errs[i] = lua.ParseGrab(s.execs[g.shard].take(ctx, call))
		s.post(g.shard, replies[i].Changes)
	})
	return replies, errs
}

// settleTakes decides the answer when not every shard took: it undoes the shards
// that did (nothing was published, so the ledger forgets them) and names the first
// failing item. done is false only when every shard took.
func (s *Grabber) settleTakes(req Request, gs []group, replies []lua.GrabReply, errs []error, now time.Time) (Result, bool, error) {
	rid := req.RequestID
	for i, err := range errs {
		s.logErr("take failed", err, "requestId", rid, "shard", gs[i].shard)
	}
	t := sortTakes(req, gs, replies, errs)
	if len(t.took) == len(gs) {
		return Result{}, false, nil
	}
	if len(t.took) > 0 {
		s.settle.undo(req, t.took)
	}
	switch {
	case t.reused:
		return Result{RequestID: rid, Result: RequestIDReused, Message: "requestId already used with another body"}, true, nil
	case len(t.dup) > 0:
		return s.replay(req, t.dup, t.dupEnvs), true, nil
	case errs[t.failed] != nil:
		return notTaken(rid, t.failedAt, "shard unavailable; nothing was taken"), true, nil
	}
	return s.refuse(req, gs[t.failed], replies[t.failed], t.failedAt, now)
}

// sortedTakes is what the shards answered a grab's takes, sorted for its answer.
type sortedTakes struct {
	took             []group
	failed, failedAt int // the group and the item (the first by request order) that failed
	dup              []string
	dupEnvs          []lua.Envelope // by item: what a replayed pool item took, nil when none did
	reused           bool
}

func sortTakes(req Request, gs []group, replies []lua.GrabReply, errs []error) sortedTakes {
	t := sortedTakes{failed: -1, failedAt: len(req.Items)}
	bucketed := -1
	for i, g := range gs {
		switch {
		case errs[i] != nil:
			if g.idx[0] < t.failedAt {
				t.failed, t.failedAt = i, g.idx[0]
			}
		case replies[i].Code == lua.CodeOK:
			t.took = append(t.took, g)
		case replies[i].Code == lua.CodeDuplicate:
			t.dup = append(t.dup, replies[i].LedgerState)
			for k, at := range g.idx {
				if e := envelopeAt(replies[i].Envelopes, k); e.IsPool() {
					if t.dupEnvs == nil {
						t.dupEnvs = make([]lua.Envelope, len(req.Items))
					}
					t.dupEnvs[at] = e
				}
			}
		case replies[i].Code == lua.CodeRequestIDReused:
			t.reused = true
		case replies[i].Code == lua.CodeBucketed:
			bucketed = i // says nothing of the item's fate: any definite refusal answers first
		default:
			if at := g.idx[replies[i].Index]; at < t.failedAt {
				t.failed, t.failedAt = i, at
			}
		}
	}
	if t.failed < 0 && bucketed >= 0 {
		t.failed, t.failedAt = bucketed, gs[bucketed].idx[replies[bucketed].Index]
	}
	return t
}

// refuse answers the refusal group g's script gave item failedAt, and caches it
// by promotion when it is one every grab of the promotion would get.
func (s *Grabber) refuse(req Request, g group, r lua.GrabReply, failedAt int, now time.Time) (Result, bool, error) {
	rid := req.RequestID
	key := g.keys[r.Index]
	base := promo.BucketBase(key) // refusals are cached by promotion, not by bucket
	switch r.Code {
	case lua.CodeBucketed: // learned for the next send, which may follow it (buckets.go)
		s.route.learn(base, r.Buckets, r.IPLimit, now)
		return notTaken(rid, failedAt, "the promotion is in buckets this send may not move to (another send of the requestId may be at work); nothing was taken by this one; retry with the same requestId"), true, nil
	case lua.CodeIPPartNeeded: // an ip limit set since it was learned: the next send counts the ip
		s.route.learn(base, req.Items[failedAt].buckets, true, now)
		return notTaken(rid, failedAt, "the promotion's ip limit changed while this send was at work; nothing was taken by this one; retry with the same requestId"), true, nil
	case lua.CodeTooMany:
		return Result{}, true, &httpx.FieldError{Field: fmt.Sprintf("items[%d].num", failedAt), Msg: "above the promotion's maxPerGrab"}
	case lua.CodeRateLimited:
		res := refusal(rid, RateLimited, failedAt, "promotion rate limit reached")
		res.RetryAfter = time.Duration(r.RetryAfterMs) * time.Millisecond
		return res, true, nil
	}
	o := outcomeOf(r.Code)
	if o == NotFound && s.guard.shardLost(g.shard) { // lostshard.go
		return notTaken(rid, failedAt, lostMessage(g.shard)), true, nil
	}
	inBuckets := req.Items[failedAt].buckets > 1
	if cacheable(o) && !(o == NotFound && inBuckets) && (o != SoldOut || s.route.allSoldOut(req.Items[failedAt], key, r.Left, now)) {
		c := cachedRefusal{o: o}
		if o == NotStarted {
			c.until = time.UnixMilli(r.StartMs)
		}
		s.refusals.Put(base, c, now)
	}
	return refusal(rid, o, failedAt, ""), true, nil
}

// replay answers a request the ledger already holds with its first answer. The
// states of its parts decide by precedence, not by shard order: one still pending
// means the first answer is not known yet; one aborted means the grab was rolled
// back as a whole (its committed parts were then cancelled, so they read C or R);
// only when every part is cancelled or returned was it granted and since returned.
// envs holds, by item, what a pool item's entry took (nil when no item is a
// pool's): a replay of a grant answers the same amount.
func (s *Grabber) replay(req Request, states []string, envs []lua.Envelope) Result {
	rid := req.RequestID
	switch {
	case slices.Contains(states, lua.LedgerPending):
		return unavailable(rid, Undecided, nil, "a grab with this requestId is still being committed; retry")
	case slices.Contains(states, lua.LedgerAborted) || slices.Contains(states, lua.LedgerAbortRecorded):
		return unavailable(rid, RolledBack, nil, "this requestId was rolled back; retry with a new requestId")
	case slices.Contains(states, lua.LedgerCancelled) || slices.Contains(states, lua.LedgerReturned):
		return Result{RequestID: rid, Result: AlreadyReturned, Message: "this grab was granted and has since been returned"}
	}
	out := Result{RequestID: rid, Result: Granted, Message: "replay of a granted grab"}
	for i, it := range req.Items {
		out.Items = append(out.Items, ItemResult{PromoID: it.PromoID, Type: it.Type, Num: it.Num})
		if i < len(envs) && envs[i].IsPool() {
			out.Items[i].Amount = &envs[i].Amount
		}
	}
	return out
}

// took is the groups whose takes succeeded.
func took(gs []group, replies []lua.GrabReply) []group {
	var out []group
	for i, g := range gs {
		if replies[i].Code == lua.CodeOK && replies[i].Remaining != nil {
			out = append(out, g)
		}
	}
	return out
}

// bucketsOf is the bucket count a q.lua item names: none for an ordinary item,
// which q.lua checks is of an ordinary promotion all the same.
func bucketsOf(it Item, part string) int {
	if part == "" {
		return 0
	}
	return it.buckets
}

func outcomeOf(c lua.Code) Outcome {
	switch c {
	case lua.CodeNotFound:
		return NotFound
	case lua.CodeStopped:
		return Stopped
	case lua.CodeNotStarted:
		return NotStarted
	case lua.CodeEnded:
		return Ended
	case lua.CodeSoldOut:
		return SoldOut
	case lua.CodePinLimit:
		return PinLimit
	case lua.CodeIPLimit:
		return IPLimit
	case lua.CodeRateLimited:
		return RateLimited
	case lua.CodeChannelNotAllowed:
		return ChannelNotAllowed
	}
	return Unavailable
}
