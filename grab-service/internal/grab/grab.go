package grab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/fanout"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// Grab takes qualification for every item, all or nothing, and answers GRANTED only
// once the GRAB flow event is acknowledged. The error return is for failures of the
// service itself (and bad input found late, num above maxPerGrab); every business
// answer, refusals included, is a Result.
func (s *Grabber) Grab(ctx context.Context, req Request) (Result, error) {
	start := s.Clock()
	res, err := s.grab(ctx, req, start)
	s.Metrics.grabLatency.Observe(s.Clock().Sub(start).Seconds())
	if err == nil {
		s.Metrics.grabs.WithLabelValues(string(res.Result)).Inc()
	}
	return res, err
}

func (s *Grabber) grab(ctx context.Context, req Request, now time.Time) (Result, error) {
	rid := req.RequestID
	snap := s.Switches.Load()
	if !snap.GrabEnabled {
		return Result{RequestID: rid, Result: Degraded, Message: "grabs are switched off by on-call; retry later"}, nil
	}
	if snap.BlockedBuyer(req.Pin, req.IP) {
		s.Metrics.shortCircuit.WithLabelValues(string(Blocked)).Inc()
		return Result{RequestID: rid, Result: Blocked, Message: "this buyer (pin or ip) is blocked by on-call"}, nil
	}
	for i, it := range req.Items {
		if snap.Blocked(it.PromoID, it.Type) {
			s.Metrics.shortCircuit.WithLabelValues(string(Stopped)).Inc()
			return refusal(rid, Stopped, i, "promotion blocked by on-call"), nil
		}
	}
	if res, ok := s.shortCircuit(ctx, req, now); ok {
		return res, nil
	}

	deadline := now.Add(s.cfg.AnswerTimeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req.Items = slices.Clone(req.Items) // routed in place (buckets.go)
	s.route(req.Items, req.Pin, now)
	gs := s.groups(req.Items, req.Pin, req.IP)
	if res, fenced := s.fenceRefusal(rid, gs); fenced {
		return res, nil
	}
	if snap.KafkaDegrade {
		// The cap is for new grabs: a resend of one that holds a claim may hold a
		// grant, and its answer is in the ledger (it costs MySQL nothing), so it goes on
		// rather than be told a definite RATE_LIMITED.
		if wait, ok := s.degradeCap.take(snap.DegradeMaxPerSecond, now); !ok && !s.Resend(ctx, req) {
			s.Metrics.shortCircuit.WithLabelValues("DEGRADE_CAP").Inc()
			return degradeCapped(rid, snap.DegradeMaxPerSecond, wait), nil
		}
	}
	// The claim lands before any take, or with it in one q.lua call (foldsClaim), so
	// a requestId without a claim holds nothing and the short-circuit may answer for
	// it (claim.go).
	// The items for the claim (the request index entry names where the takes are,
	// not what a pool handed out: the ledger entries say that) and the event.
	hash, items := req.bodyHash(), flowItems(req.Items, gs, nil)
	res, err := s.claimAndTake(ctx, req, gs, hash, items, now, deadline, snap.RateFactorPermille(), s.foldsClaim(req, gs))
	if errors.Is(err, errClaimApart) {
		return s.claimAndTake(ctx, req, gs, hash, items, now, deadline, snap.RateFactorPermille(), false)
	}
	return res, err
}

// errClaimApart: a take that carried its claim found the requestId claimed already
// (a resend, or a reuse) or its promotion in buckets, and took nothing (a take of
// several items may have charged the rate windows of those before, as a fall-over
// does); the grab goes again with its claim made apart, the way that tells what the
// claim holds and follows buckets.
var errClaimApart = errors.New("the claim must be made apart from the take")

// claimAndTake claims the requestId, takes, publishes and commits. With fold the
// claim is made by the take's own q.lua call (foldsClaim), else first, on its own.
func (s *Grabber) claimAndTake(ctx context.Context, req Request, gs []group, hash string, items []flow.Item,
	now, deadline time.Time, factor int64, fold bool) (Result, error) {
	rid := req.RequestID
	var c claim
	if fold {
		s.Metrics.claimsFolded.Inc()
		c = s.foldedClaim(req, hash, items)
	} else {
		s.Metrics.claimsApart.Inc()
		c = s.claim(ctx, req, hash, items)
		if res, done := s.checkClaim(req, c); done {
			return res, nil
		}
		if err := s.Fault("after-claim"); err != nil {
			return Result{}, err
		}
		if !c.created { // takes where the claim says (buckets.go)
			if res, wait := s.followClaim(req, c, s.Clock()); wait {
				return res, nil
			}
			gs = s.groups(req.Items, req.Pin, req.IP) // asked of the fence below
			items = flowItems(req.Items, gs, nil)
		}
	}
	// The generations are read before the fence's last word on the shards: a move
	// after it is seen once the takes are back (movedDuring, below). grab() asked
	// the fence before any Redis call, so a lost shard's grabs cost none; this asks
	// again after the claim's round trip, and of the shards the claim named.
	gens := s.generations(gs)
	if res, fenced := s.fenceRefusal(rid, gs); fenced {
		if c.created {
			s.releaseClaim(req)
		}
		return res, nil
	}
	replies, errs := s.take(ctx, req, hash, gs, now, deadline, factor, c.fold)
	if c.fold != nil {
		switch {
		case errs[0] != nil, replies[0].Code == lua.CodeOK, replies[0].Code == lua.CodeDuplicate:
			c.created = true // written with the take or the replay (or maybe, when unanswered)
		case replies[0].Code == lua.CodeClaimed, replies[0].Code == lua.CodeBucketed:
			return Result{}, errClaimApart
		default: // refused: no claim was written, so none is released or waited for
			c.claimedAt = time.Time{}
		}
	}
	tried := make([]uint32, len(req.Items))
	for attempt := 1; attempt < attemptBound(req.Items) && s.mayFallOver(c, s.Clock()) && s.fallOver(req, gs, replies, errs, tried, now); attempt++ {
		if !s.undo(req, took(gs, replies)) {
			break // a take left on a shard that did not answer must stay the index's: settleTakes answers
		}
		gs = s.groups(req.Items, req.Pin, req.IP)
		items = flowItems(req.Items, gs, nil)
		gens = s.generations(gs)
		if res, fenced := s.fenceRefusal(rid, gs); fenced {
			if c.created {
				s.releaseClaim(req)
			}
			return res, nil
		}
		if moved, err := s.reclaim(ctx, req, hash, items, &c); err != nil || !moved {
			s.logErr("request index not rewritten for a fall-over", err, "requestId", rid)
			if c.created && err != nil {
				s.releaseClaim(req) // this send's claim, and nothing taken: nothing to keep
			}
			return refusal(rid, Unavailable, 0, "another send of this requestId is moving its takes, or its index shard did not answer; nothing was taken by this one; retry with the same requestId"), nil
		}
		s.Metrics.fallOvers.Inc()
		replies, errs = s.take(ctx, req, hash, gs, now, deadline, factor, nil)
	}
	if s.movedDuring(gs, &gens) {
		// A shard's client moved to another server (a promoted replica) while the
		// takes were out: a take sent after the move ran on a server no one has
		// judged whole, which may sell what the record already granted. Nothing is
		// published yet, so it is undone and the grab told to retry.
		if !s.undo(req, took(gs, replies)) { // left for the reconciler, under the claim
			return refusal(rid, Unavailable, 0, "a shard moved to another server during the grab and its takes are being undone; retry with the same requestId"), nil
		}
		if c.created {
			s.releaseClaim(req)
		}
		return refusal(rid, Unavailable, 0, "a shard moved to another server during the grab; nothing was taken; retry"), nil
	}
	if res, err, done := s.settleTakes(req, gs, replies, errs, now); done {
		if c.created && res.Result != Granted {
			s.releaseClaim(req)
		}
		if err == nil {
			res = s.inFlight(req, c, res, s.Clock())
		}
		return res, err
	}

	if err := s.Fault("after-take"); err != nil {
		return Result{}, err
	}
	taken := grabEnvelopes(replies)
	if taken != nil { // the GRAB says what each pool item took
		items = flowItems(req.Items, gs, taken)
	}
	ev := s.event(flow.Grab, req.RequestID, req.Pin, req.IP, items, now, "")
	ev.BodyHash = hash // the record keeps the ledger's body hash, for an exact rebuild
	ev.HoldUntil = c.holdUntilMs
	if err := s.publish(ctx, ev); err != nil {
		s.logErr("grab event not acknowledged; rolling back", err, "requestId", rid)
		return rolledBack(rid, s.abort(req, gs, taken, false)), nil
	}
	if err := s.Fault("after-publish"); err != nil {
		return Result{}, err
	}
	if !s.commit(ctx, req, gs) {
		return rolledBack(rid, s.abort(req, gs, taken, true)), nil
	}
	out := Result{RequestID: rid, Result: Granted, Items: make([]ItemResult, len(req.Items))}
	for gi, g := range gs {
		for k, i := range g.idx {
			if !g.holdsStock(k) {
				continue // a part that counts the pin or the ip only
			}
			it := req.Items[i]
			rem := replies[gi].Remaining[k]
			out.Items[i] = ItemResult{PromoID: it.PromoID, Type: it.Type, Num: it.Num, Remaining: &rem}
			if e := envelopeAt(replies[gi].Envelopes, k); e.IsPool() {
				out.Items[i].Amount = &e.Amount
			}
		}
	}
	return out, nil
}

// take runs one q.lua per shard, shards in parallel; fold, when set, is the claim
// the one shard's call makes with its take (foldsClaim).
func (s *Grabber) take(ctx context.Context, req Request, hash string, gs []group, now, deadline time.Time, factor int64, fold *lua.GrabClaim) ([]lua.GrabReply, []error) {
	replies := make([]lua.GrabReply, len(gs))
	errs := make([]error, len(gs))
	fanout.Each(gs, func(i int, g group) {
		call := lua.GrabCall{
			NowMs: now.UnixMilli(), DeadlineMs: deadline.UnixMilli(),
			RequestID: req.RequestID, BodyHash: hash, Pin: req.Pin, IP: req.IP,
			RateFactorPermille: factor, Outbox: s.cfg.StateOutboxKey, Claim: fold,
		}
		for k, key := range g.keys {
			it := req.Items[g.idx[k]]
			call.Items = append(call.Items, lua.GrabItem{Key: key, Num: it.Num, Part: g.parts[k], Buckets: bucketsOf(it, g.parts[k])})
		}
		replies[i], errs[i] = lua.ParseGrab(s.execs[g.shard].do(ctx, func(p redis.Pipeliner) *redis.Cmd {
			return lua.QueueGrab(ctx, p, call)
		}))
		s.post(g.shard, replies[i].Changes)
	})
	return replies, errs
}

// settleTakes decides the answer when not every shard took: it undoes the shards
// that did (nothing was published, so the ledger forgets them) and names the first
// failing item. done is false only when every shard took.
func (s *Grabber) settleTakes(req Request, gs []group, replies []lua.GrabReply, errs []error, now time.Time) (Result, error, bool) {
	rid := req.RequestID
	var took []group
	failed, failedAt, bucketed := -1, len(req.Items), -1
	var dup []string
	var dupEnvs []lua.Envelope // by item: what a replayed pool item took, nil when none did
	reused := false
	for i, g := range gs {
		switch {
		case errs[i] != nil:
			s.logErr("take failed", errs[i], "requestId", rid, "shard", g.shard)
			if g.idx[0] < failedAt {
				failed, failedAt = i, g.idx[0]
			}
		case replies[i].Code == lua.CodeOK:
			took = append(took, g)
		case replies[i].Code == lua.CodeDuplicate:
			dup = append(dup, replies[i].LedgerState)
			for k, at := range g.idx {
				if e := envelopeAt(replies[i].Envelopes, k); e.IsPool() {
					if dupEnvs == nil {
						dupEnvs = make([]lua.Envelope, len(req.Items))
					}
					dupEnvs[at] = e
				}
			}
		case replies[i].Code == lua.CodeRequestIDReused:
			reused = true
		case replies[i].Code == lua.CodeBucketed:
			// Says nothing of the item's fate: any definite refusal answers first.
			bucketed = i
		default:
			if at := g.idx[replies[i].Index]; at < failedAt {
				failed, failedAt = i, at
			}
		}
	}
	if failed < 0 && bucketed >= 0 {
		failed, failedAt = bucketed, gs[bucketed].idx[replies[bucketed].Index]
	}
	if len(took) == len(gs) {
		return Result{}, nil, false
	}
	if len(took) > 0 {
		s.undo(req, took)
	}
	switch {
	case reused:
		return Result{RequestID: rid, Result: RequestIDReused, Message: "requestId already used with another body"}, nil, true
	case len(dup) > 0:
		return s.replay(req, dup, dupEnvs), nil, true
	case errs[failed] != nil:
		return refusal(rid, Unavailable, failedAt, "shard unavailable; nothing was taken"), nil, true
	}
	r := replies[failed]
	key := gs[failed].keys[r.Index]
	base := promo.BucketBase(key) // refusals are cached by promotion, not by bucket
	switch r.Code {
	case lua.CodeBucketed: // learned for the next send, which may follow it (buckets.go)
		s.buckets.layouts.Put(base, bucket.LayoutOf(s.ring, base, r.Buckets), now)
		return refusal(rid, Unavailable, failedAt, "the promotion is in buckets this send may not move to (another send of the requestId may be at work); nothing was taken by this one; retry with the same requestId"), nil, true
	case lua.CodeTooMany:
		return Result{}, &FieldError{Field: fmt.Sprintf("items[%d].num", failedAt), Msg: "above the promotion's maxPerGrab"}, true
	case lua.CodeRateLimited:
		res := refusal(rid, RateLimited, failedAt, "promotion rate limit reached")
		res.RetryAfter = time.Duration(r.RetryAfterMs) * time.Millisecond
		return res, nil, true
	}
	o := outcomeOf(r.Code)
	if o == NotFound && s.shardLost(gs[failed].shard) { // lostshard.go
		return refusal(rid, Unavailable, failedAt, lostMessage(gs[failed].shard)), nil, true
	}
	inBuckets := req.Items[failedAt].buckets > 1
	if cacheable(o) && !(o == NotFound && inBuckets) && (o != SoldOut || s.allSoldOut(req.Items[failedAt], key, r.Left, now)) {
		c := cachedRefusal{o: o}
		if o == NotStarted {
			c.until = time.UnixMilli(r.StartMs)
		}
		s.refusals.Put(base, c, now)
	}
	return refusal(rid, o, failedAt, ""), nil, true
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
		return Result{RequestID: rid, Result: Unavailable, Message: "a grab with this requestId is still being committed; retry"}
	case slices.Contains(states, lua.LedgerAborted) || slices.Contains(states, lua.LedgerAbortRecorded):
		return Result{RequestID: rid, Result: Unavailable, Message: "this requestId was rolled back; retry with a new requestId"}
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

// undo gives back takes whose GRAB was never published: the ledger forgets them.
// It reports whether every shard did.
func (s *Grabber) undo(req Request, gs []group) bool {
	ctx, cancel := s.settleCtx()
	defer cancel()
	_, errs := s.returnOn(ctx, gs, lua.ReturnCall{RequestID: req.RequestID, Pin: req.Pin, Mode: lua.ReturnUndo, NowMs: s.Clock().UnixMilli()})
	for i, err := range errs {
		// Left pending, the take is settled by the reconciler after its deadline.
		s.logErr("undo failed; the reconciler will settle it", err, "requestId", req.RequestID, "shard", gs[i].shard)
	}
	s.Metrics.rollbacks.WithLabelValues("refused").Inc()
	return !slices.ContainsFunc(errs, func(err error) bool { return err != nil })
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

// allSoldOut reports whether a SOLD_OUT of item, answered by its hash key with
// left units, is its whole promotion's: an ordinary item's always, a bucketed
// one's once every bucket is known to be empty (the one that answered is marked
// so when it has nothing left; one with fewer units than the grab asked is not).
func (s *Grabber) allSoldOut(it Item, key string, left int64, now time.Time) bool {
	if it.buckets <= 1 {
		return true
	}
	if left > 0 {
		return false
	}
	l := s.layout(promo.BucketBase(key), it.buckets)
	s.buckets.empty.Put(key, struct{}{}, now)
	return s.nextBucket(l, -1, 0, now) < 0
}

// rolledBack answers a grab that could not be committed. When the rollback did
// not finish (a shard did not answer), the reconciler settles the takes left open
// by the record, which may hold the GRAB: then the grant stands, so the buyer is
// told to ask again with the same requestId rather than that nothing was taken.
func rolledBack(rid string, settled bool) Result {
	msg := "the grab could not be committed; nothing was taken"
	if !settled {
		msg = "the grab could not be committed and its rollback has not finished; retry with the same requestId for the outcome"
	}
	return Result{RequestID: rid, Result: Unavailable, Message: msg}
}

// abort gives back takes whose GRAB may have been published: stock returns at once
// and each entry is marked as owing a CANCEL, so the record nets the grab out
// whichever way the acknowledgement went. When the GRAB was acknowledged
// (published), Kafka is up, so the CANCEL goes out here and the entries are
// finalized: a shard lost a moment later (the fault that most often fails a commit)
// then cannot take the debt with it. Otherwise the reconciler publishes it on its
// next pass. Entries already gone (their shard came back empty) hold no debt, so
// their CANCEL is always published here. taken is what the groups' takes handed
// out of envelope pools (grabEnvelopes). It reports whether every part settled.
func (s *Grabber) abort(req Request, gs []group, taken [][]lua.Envelope, published bool) bool {
	ctx, cancel := s.settleCtx()
	defer cancel()
	call := lua.ReturnCall{RequestID: req.RequestID, Pin: req.Pin, Mode: lua.ReturnAbort, NowMs: s.Clock().UnixMilli()}
	replies, errs := s.returnOn(ctx, gs, call)
	settled := true
	var owing, committed, gone []group
	var owingEnvs, goneEnvs [][]lua.Envelope // what each group gave back of a pool
	for i, err := range errs {
		s.logErr("abort failed; the reconciler will settle it", err, "requestId", req.RequestID, "shard", gs[i].shard)
		switch {
		case err != nil:
			settled = false
		case replies[i].Code == lua.ReturnReturned:
			owing = append(owing, gs[i])
			owingEnvs = append(owingEnvs, replies[i].Envelopes)
		case replies[i].Code == lua.ReturnCommitted:
			committed = append(committed, gs[i])
		case replies[i].Code == lua.ReturnNotFound:
			gone = append(gone, gs[i])
			if i < len(taken) {
				goneEnvs = append(goneEnvs, taken[i])
			} else {
				goneEnvs = append(goneEnvs, nil)
			}
		}
	}
	if len(committed) > 0 { // part of the grab was committed before another part failed
		call.Mode, call.Reason = lua.ReturnCancel, "ROLLBACK"
		replies, errs := s.returnOn(ctx, committed, call)
		for i, err := range errs {
			s.logErr("rollback of a committed part failed", err, "requestId", req.RequestID, "shard", committed[i].shard)
			switch {
			case err != nil:
				settled = false
			case replies[i].Code == lua.ReturnReturned:
				owing = append(owing, committed[i])
				owingEnvs = append(owingEnvs, replies[i].Envelopes)
			}
		}
	}
	// An entry gone (its shard came back empty) gave nothing back here; its CANCEL
	// names the parts its take handed out, which the rebuild puts back by that
	// CANCEL (the record nets a GRAB by the CANCEL of the same request).
	back, backEnvs := gone, goneEnvs
	if published {
		back = slices.Concat(gone, owing)
		backEnvs = slices.Concat(goneEnvs, owingEnvs)
	}
	if len(back) > 0 {
		if s.publishRollback(ctx, req, back, backEnvs) {
			if published {
				s.finalize(req.RequestID, req.Pin, owing)
			}
		} else if len(gone) > 0 {
			settled = false // nothing in Redis owes their CANCEL
		}
	}
	s.Metrics.rollbacks.WithLabelValues("uncommitted").Inc()
	return settled
}

// publishRollback publishes the CANCEL (ROLLBACK) of the groups' items, with the
// pool parts envs says each group gave back (flowItems), and reports whether
// Kafka took it. An item whose entry is gone has nothing left in Redis to owe its
// CANCEL, so it is paid here or the rebuild would restore the grant
// (docs/design.md, "Rollbacks and owed CANCELs").
func (s *Grabber) publishRollback(ctx context.Context, req Request, gs []group, envs [][]lua.Envelope) bool {
	items := flowItems(req.Items, gs, envs)
	if len(items) == 0 { // parts that count a pin or an ip only: never a unit of the record
		return true
	}
	ev := s.event(flow.Cancel, req.RequestID, req.Pin, req.IP, items, s.Clock(), "ROLLBACK")
	if err := s.publish(ctx, ev); err != nil {
		s.logErr("rollback CANCEL not acknowledged; an entry still owing it is published by the reconciler, one already gone is reported by `recovery verify`",
			err, "requestId", req.RequestID)
		return false
	}
	return true
}

// commit marks every take granted and records where the request's items live.
func (s *Grabber) commit(ctx context.Context, req Request, gs []group) bool {
	ok := make([]bool, len(gs))
	fanout.Each(gs, func(i int, g group) {
		for attempt := 0; attempt < 2 && !ok[i]; attempt++ {
			code, err := s.execs[g.shard].commit(ctx, lua.CommitCall{RequestID: req.RequestID, Keys: g.keys})
			if err != nil {
				s.logErr("commit failed", err, "requestId", req.RequestID, "shard", g.shard, "attempt", attempt)
				continue
			}
			ok[i] = code == lua.CommitCommitted
			if !ok[i] {
				s.Logger.Warn("commit refused: the reconciler settled the take first", "requestId", req.RequestID, "code", code.String())
				return
			}
		}
	})
	for _, b := range ok {
		if !b {
			return false
		}
	}
	return true
}

// flowItems is the flow event items of the request's items whose units the groups
// hold, in request order, each with the shard they come from (its stock bucket's
// for a bucketed promotion): the ring was asked once, by groups. envs, when not
// nil, is what each group's script answered its items took or gave back of an
// envelope pool (envs[g][k] for group g's k-th key; see grabEnvelopes): a pool
// item then carries its amount and parts.
func flowItems(items []Item, gs []group, envs [][]lua.Envelope) []flow.Item {
	shard := make([]int, len(items))
	for i := range shard {
		shard[i] = -1
	}
	var env []lua.Envelope // by item, made only when an item is a pool's
	for gi, g := range gs {
		for k, i := range g.idx {
			if !g.holdsStock(k) {
				continue
			}
			shard[i] = g.shard
			if gi < len(envs) {
				if e := envelopeAt(envs[gi], k); e.IsPool() {
					if env == nil {
						env = make([]lua.Envelope, len(items))
					}
					env[i] = e
				}
			}
		}
	}
	out := make([]flow.Item, 0, len(items))
	for i, it := range items {
		if shard[i] < 0 {
			continue
		}
		fi := flow.Item{PromoID: it.PromoID, Type: it.Type, Num: it.Num, Shard: shard[i]}
		if it.buckets > 1 {
			fi.Bucket, fi.Buckets = it.bucket, it.buckets
		}
		if env != nil {
			fi.Amount, fi.Parts = env[i].Amount, env[i].Parts
		}
		out = append(out, fi)
	}
	return out
}

// grabEnvelopes is what each group's take handed out of envelope pools, by group
// as flowItems takes it; nil when no item of the grab is a pool's (an ordinary
// grab allocates nothing for it).
func grabEnvelopes(replies []lua.GrabReply) [][]lua.Envelope {
	var out [][]lua.Envelope
	for i, r := range replies {
		if r.Envelopes == nil {
			continue
		}
		if out == nil {
			out = make([][]lua.Envelope, len(replies))
		}
		out[i] = r.Envelopes
	}
	return out
}

// envelopeAt is the envelope a script answered for its k-th item: the zero
// Envelope (no pool) when it answered none.
func envelopeAt(envs []lua.Envelope, k int) lua.Envelope {
	if k < len(envs) {
		return envs[k]
	}
	return lua.Envelope{}
}

func (s *Grabber) event(kind flow.Kind, rid, pin, ip string, items []flow.Item, at time.Time, reason string) flow.Event {
	return flow.Event{EventID: newEventID(), Kind: kind, RequestID: rid, Pin: pin, IP: ip,
		Items: items, OccurredAt: flow.Stamp(at), Reason: reason}
}

func (s *Grabber) publish(ctx context.Context, events ...flow.Event) error {
	start := time.Now()
	err := s.Publisher.Publish(ctx, events...)
	s.Metrics.kafkaLatency.Observe(time.Since(start).Seconds())
	if err != nil {
		s.Metrics.kafkaErrors.WithLabelValues(string(events[0].Kind)).Inc()
	}
	return err
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
	}
	return Unavailable
}
