package grab

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/lua"
)

// A grab, read in order: admit (switches, bans, the local refusal cache), place
// (route and group the items, fence, degrade cap), then per attempt claim, fence,
// take, fall over, check for a moved shard, settle a refusal, publish, commit and
// answer. docs/design.md's glossary names each term.

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
	snap := s.Switches.Load()
	if res, done := s.admit(ctx, req, snap, now); done {
		return res, nil
	}
	deadline := now.Add(s.cfg.AnswerTimeout)
	ctx, cancel := httpx.WithDeadline(ctx, deadline) // the request's one timer, not a second
	defer cancel()
	r := &grabRun{s: s, req: req, now: now, deadline: deadline, factor: snap.RateFactorPermille()}
	if res, done := r.place(ctx, snap); done {
		return res, nil
	}
	return r.run(ctx)
}

// admit answers what needs no shard: grabs switched off, a banned buyer or a
// blocked promotion, and a refusal the local cache holds.
func (s *Grabber) admit(ctx context.Context, req Request, snap *configcenter.Snapshot, now time.Time) (Result, bool) {
	rid := req.RequestID
	if !snap.GrabEnabled {
		return Result{RequestID: rid, Result: Degraded, Message: "grabs are switched off by on-call; retry later"}, true
	}
	if snap.BlockedBuyer(req.Pin, req.IP) {
		s.Metrics.shortCircuit.WithLabelValues(string(Blocked)).Inc()
		return Result{RequestID: rid, Result: Blocked, Message: "this buyer (pin or ip) is blocked by on-call"}, true
	}
	for i, it := range req.Items {
		if snap.Blocked(it.PromoID, it.Type) {
			s.Metrics.shortCircuit.WithLabelValues(string(Stopped)).Inc()
			return refusal(rid, Stopped, i, "promotion blocked by on-call"), true
		}
	}
	return s.shortCircuit(ctx, req, now)
}

// grabRun is one grab in progress: the request, where its parts go (groups), its
// claim, the shards' client generations and what the takes answered. Its steps are
// its methods below, in the order run calls them.
type grabRun struct {
	s             *Grabber
	req           Request
	now, deadline time.Time
	factor        int64 // the rate limits' factor on-call set (permille)
	fold          bool  // the take's q.lua call makes the claim (foldsClaim)
	hash          string
	gs            []group
	items         []flow.Item // the request index entry's and the GRAB's items
	c             claim
	gens          [ring.Shards]uint64
	replies       []lua.GrabReply
	errs          []error
	taken         [][]lua.Envelope // what the takes handed out of envelope pools
}

// place routes the items (buckets.go) and groups them by shard; a fenced shard or
// the degrade cap answers before any Redis call.
func (r *grabRun) place(ctx context.Context, snap *configcenter.Snapshot) (Result, bool) {
	s, req := r.s, &r.req
	req.Items = slices.Clone(req.Items) // routed in place
	s.route.route(req.Items, req.Pin, r.now)
	r.gs = s.route.groups(req.Items, req.Pin, req.IP)
	if res, fenced := s.guard.fenceRefusal(req.RequestID, r.gs); fenced {
		return res, true
	}
	if snap.KafkaDegrade {
		// The cap is for new grabs: a resend that holds a claim may hold a grant,
		// whose answer is in the ledger, so it goes on rather than be refused.
		if wait, ok := s.degradeCap.take(snap.DegradeMaxPerSecond, r.now); !ok {
			switch resend, err := s.Resend(ctx, *req); {
			case err != nil:
				s.logErr("degrade cap: resend unknown", err, "requestId", req.RequestID)
				return IndexSilent(req.RequestID), true
			case !resend:
				s.Metrics.shortCircuit.WithLabelValues("DEGRADE_CAP").Inc()
				return degradeCapped(req.RequestID, snap.DegradeMaxPerSecond, wait), true
			}
		}
	}
	// The index entry names where the takes are; the ledger entries say what a
	// pool handed out.
	r.hash, r.items = req.bodyHash(), flowItems(req.Items, r.gs, nil)
	return Result{}, false
}

// run takes the grab through its steps. A claim folded into the take that finds
// it must be made apart (errClaimApart) runs the steps once more, claiming first.
func (r *grabRun) run(ctx context.Context) (Result, error) {
	gs, items := r.gs, r.items
	fold := r.s.index.foldsClaim(r.req, gs)
	for {
		r.gs, r.items = gs, items
		res, err := r.attempt(ctx, fold)
		if !errors.Is(err, errClaimApart) || !fold {
			return res, err
		}
		fold = false
	}
}

// attempt is one pass of the steps; each answers done when the grab ends there.
func (r *grabRun) attempt(ctx context.Context, fold bool) (Result, error) {
	steps := [...]func(*grabRun, context.Context) (Result, bool, error){
		(*grabRun).claimStep, (*grabRun).fenceStep, (*grabRun).takeStep, (*grabRun).fallOverStep,
		(*grabRun).movedStep, (*grabRun).settleStep, (*grabRun).publishStep, (*grabRun).commitStep,
	}
	r.fold, r.c = fold, claim{}
	for _, step := range steps {
		if res, done, err := step(r, ctx); done || err != nil {
			return res, err
		}
	}
	return r.answer(), nil
}

// errClaimApart: a take that carried its claim found the requestId claimed already
// (a resend, or a reuse), or its promotion in buckets, or a bucketed grab must
// move (movesTakes), and took nothing; the grab goes again with its claim made
// apart, which tells what the claim holds and follows buckets.
var errClaimApart = errors.New("the claim must be made apart from the take")

// claimStep claims the requestId in the request index before any take, unless the
// take's own q.lua call makes the claim (folded). A send that finds the requestId
// claimed takes where the claim says (buckets.go).
func (r *grabRun) claimStep(ctx context.Context) (Result, bool, error) {
	s, req := r.s, r.req
	if r.fold {
		s.Metrics.claimsFolded.Inc()
		r.c = s.index.foldedClaim(req, r.hash, r.items)
		return Result{}, false, nil
	}
	s.Metrics.claimsApart.Inc()
	r.c = s.index.claim(ctx, req, r.hash, r.items)
	if res, done := s.index.checkClaim(req, r.c); done {
		return res, true, nil
	}
	if err := s.Fault.At("after-claim"); err != nil {
		return Result{}, true, err
	}
	if r.c.created {
		return Result{}, false, nil
	}
	if res, wait := s.index.followClaim(req, r.c, s.Clock()); wait {
		return res, true, nil
	}
	r.regroup()
	return Result{}, false, nil
}

// regroup places the items again after their routes changed.
func (r *grabRun) regroup() {
	r.gs = r.s.route.groups(r.req.Items, r.req.Pin, r.req.IP)
	r.items = flowItems(r.req.Items, r.gs, nil)
}

// fenceStep reads the shards' generations, then asks the fence once more, of the
// shards the claim named: a move after this read is seen by movedStep.
func (r *grabRun) fenceStep(context.Context) (Result, bool, error) {
	r.gens = r.s.guard.generations(r.gs)
	res, fenced := r.fenced()
	return res, fenced, nil
}

// fenced refuses the grab when a shard of its groups is fenced, releasing the
// claim it made.
func (r *grabRun) fenced() (Result, bool) {
	res, fenced := r.s.guard.fenceRefusal(r.req.RequestID, r.gs)
	if fenced && r.c.created {
		r.s.index.releaseClaim(r.req)
	}
	return res, fenced
}

// takeStep runs the takes; a folded claim learns from the one shard's answer
// whether it was written.
func (r *grabRun) takeStep(ctx context.Context) (Result, bool, error) {
	r.replies, r.errs = r.s.take(ctx, r.req, r.hash, r.gs, r.now, r.deadline, r.factor, r.c.fold)
	if r.c.fold == nil {
		return Result{}, false, nil
	}
	switch code := r.replies[0].Code; {
	case r.errs[0] != nil, code == lua.CodeOK, code == lua.CodeDuplicate:
		r.c.created = true // written with the take or the replay (or maybe, when unanswered)
	case code == lua.CodeClaimed, code == lua.CodeBucketed, movesTakes(r.gs, code):
		return Result{}, true, errClaimApart
	default: // refused: no claim was written, so none is released or waited for
		r.c.claimedAt = time.Time{}
	}
	return Result{}, false, nil
}

// fallOverStep moves the takes of a bucketed item whose bucket is sold out (or
// whose layout was learned) to another bucket, undoing the attempt before: one
// loop, bounded by the buckets there are.
func (r *grabRun) fallOverStep(ctx context.Context) (Result, bool, error) {
	s, req := r.s, r.req
	tried := make([]uint32, len(req.Items))
	for attempt := 1; attempt < attemptBound(req.Items) && s.index.mayFallOver(r.c, s.Clock()) &&
		s.route.fallOver(req, r.gs, r.replies, r.errs, tried, r.now); attempt++ {
		if !s.settle.undo(req, took(r.gs, r.replies)) {
			break // a take left on a shard that did not answer stays the index's: settleStep answers
		}
		r.regroup()
		r.gens = s.guard.generations(r.gs)
		if res, fenced := r.fenced(); fenced {
			return res, true, nil
		}
		if res, moved := r.reclaim(ctx); !moved {
			return res, true, nil
		}
		s.Metrics.fallOvers.Inc()
		r.replies, r.errs = s.take(ctx, req, r.hash, r.gs, r.now, r.deadline, r.factor, nil)
	}
	return Result{}, false, nil
}

// reclaim points the request index entry at the next attempt's takes; another
// send moving them, or an index shard that did not answer, ends this one.
func (r *grabRun) reclaim(ctx context.Context) (Result, bool) {
	s, rid := r.s, r.req.RequestID
	moved, err := s.index.reclaim(ctx, r.req, r.hash, r.items, &r.c)
	if err == nil && moved {
		return Result{}, true
	}
	s.logErr("request index not rewritten for a fall-over", err, "requestId", rid)
	if r.c.created && err != nil {
		s.index.releaseClaim(r.req) // this send's claim, and nothing taken: nothing to keep
	}
	return notTaken(rid, 0, "another send of this requestId is moving its takes, or its index shard did not answer; nothing was taken by this one; retry with the same requestId"), false
}

// movedStep undoes the takes when a shard's client moved to another server (a
// promoted replica) while they were out: that server is not judged whole yet.
func (r *grabRun) movedStep(context.Context) (Result, bool, error) {
	s, rid := r.s, r.req.RequestID
	if !s.guard.movedDuring(r.gs, &r.gens) {
		return Result{}, false, nil
	}
	if !s.settle.undo(r.req, took(r.gs, r.replies)) { // left for the reconciler, under the claim
		return unavailable(rid, Undecided, nil, "a shard moved to another server during the grab and its takes are being undone; retry with the same requestId"), true, nil
	}
	if r.c.created {
		s.index.releaseClaim(r.req)
	}
	return notTaken(rid, 0, "a shard moved to another server during the grab; nothing was taken; retry"), true, nil
}

// settleStep answers a grab not every shard took: a refusal, a replay or a failure.
func (r *grabRun) settleStep(context.Context) (Result, bool, error) {
	s := r.s
	res, done, err := s.settleTakes(r.req, r.gs, r.replies, r.errs, r.now)
	if !done {
		return Result{}, false, nil
	}
	if r.c.created && res.Result != Granted {
		s.index.releaseClaim(r.req)
	}
	if err == nil {
		res = s.index.inFlight(r.req, r.c, res, s.Clock())
	}
	return res, true, err
}

// publishStep publishes the GRAB and waits for Kafka's acknowledgement; without
// it the takes are rolled back.
func (r *grabRun) publishStep(ctx context.Context) (Result, bool, error) {
	s, req := r.s, r.req
	if err := s.Fault.At("after-take"); err != nil {
		return Result{}, true, err
	}
	if r.taken = grabEnvelopes(r.replies); r.taken != nil { // the GRAB says what each pool item took
		r.items = flowItems(req.Items, r.gs, r.taken)
	}
	ev := newEvent(flow.Grab, req.RequestID, req.Pin, req.IP, r.items, r.now, "")
	ev.BodyHash = r.hash // the record keeps the ledger's body hash, for an exact rebuild
	ev.HoldUntil = r.c.holdUntilMs
	ev.Channel = req.Channel.String() // "" (left out) for a grab naming none
	if err := s.settle.publish(ctx, ev); err != nil {
		s.logErr("grab event not acknowledged; rolling back", err, "requestId", req.RequestID)
		return rolledBack(req.RequestID, s.settle.abort(req, r.gs, r.taken, false)), true, nil
	}
	if err := s.Fault.At("after-publish"); err != nil {
		return Result{}, true, err
	}
	return Result{}, false, nil
}

// commitStep marks every take granted; a commit refused or lost rolls the grab
// back, its CANCEL published since the GRAB was.
func (r *grabRun) commitStep(ctx context.Context) (Result, bool, error) {
	if r.s.settle.commit(ctx, r.req, r.gs) {
		return Result{}, false, nil
	}
	return rolledBack(r.req.RequestID, r.s.settle.abort(r.req, r.gs, r.taken, true)), true, nil
}

// answer is the GRANTED answer: each item with what its stock has left, and a
// pool item's amount.
func (r *grabRun) answer() Result {
	out := Result{RequestID: r.req.RequestID, Result: Granted, Items: make([]ItemResult, len(r.req.Items))}
	for gi, g := range r.gs {
		for k, i := range g.idx {
			if !g.holdsStock(k) {
				continue // a part that counts the pin or the ip only
			}
			it := r.req.Items[i]
			rem := r.replies[gi].Remaining[k]
			out.Items[i] = ItemResult{PromoID: it.PromoID, Type: it.Type, Num: it.Num, Remaining: &rem}
			if e := envelopeAt(r.replies[gi].Envelopes, k); e.IsPool() {
				out.Items[i].Amount = &e.Amount
			}
		}
	}
	return out
}
