package grab

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// A requestId is unique across the platform, whatever the promotions it names. The
// ledgers live per promotion, so they alone cannot refuse a requestId reused for
// another promotion; the request index can. Every grab claims its requestId in the
// index (SET NX, on the shard the ring gives the index key) before its takes: the
// first body wins, another body is REQUEST_ID_REUSED. The index also
// tells a cancel where a granted request's items live.

type claim struct {
	created bool // this call wrote the entry
	reused  bool // the entry holds another body
	err     error
	// claimedAt is when the entry was written: by this call, or by the send whose
	// entry it found (zero for a rebuilt entry).
	claimedAt time.Time
	// raw is the entry as stored, and items its items: where the takes of the
	// requestId are (a fall-over compares raw before it rewrites the entry).
	raw   string
	items []flow.Item
	// holdUntilMs is the hold's deadline the entry carries (0: no hold); the GRAB
	// event carries it into the record.
	holdUntilMs int64
	// fold is the claim the take's q.lua call makes (foldsClaim); created says
	// whether it did, once the take has answered.
	fold *lua.GrabClaim
}

// indexEntry is the request index entry a grab claims its requestId with.
// A held grab's entry carries its hold's deadline, counted from the same clock read.
func (s *Grabber) indexEntry(req Request, hash string, items []flow.Item) (flow.RequestIndex, []byte) {
	now := s.Clock()
	idx := flow.RequestIndex{BodyHash: hash, Pin: req.Pin, IP: req.IP, Items: items, ClaimedMs: now.UnixMilli()}
	if req.HoldSeconds > 0 {
		idx.HoldUntilMs = s.holdDeadline(now, req.HoldSeconds).UnixMilli()
	}
	return idx, idx.AppendJSON(make([]byte, 0, 192))
}

// foldsClaim reports whether a grab's claim can be made by its take's own q.lua
// call, in the same step: one shard holds all its items, and the ring puts the
// requestId's index entry on that shard too (a checkout may derive its requestIds
// so: docs/CONTRACT.md, "Request index"), with no hold and no part of a bucketed
// promotion, whose claims do more than q.lua's. A round trip to another shard less.
func (s *Grabber) foldsClaim(req Request, gs []group) bool {
	if !s.cfg.FoldClaim || len(gs) != 1 || req.HoldSeconds > 0 {
		return false
	}
	for _, p := range gs[0].parts {
		if p != "" {
			return false
		}
	}
	return gs[0].shard == s.ring.Shard(promo.RequestIndexKey(req.RequestID))
}

// foldedClaim is the claim a take will make (foldsClaim): not created until it has.
// It keeps no raw entry: only a fall-over rewrites one, and a folded grab has none.
func (s *Grabber) foldedClaim(req Request, hash string, items []flow.Item) claim {
	idx, b := s.indexEntry(req, hash, items)
	return claim{claimedAt: time.UnixMilli(idx.ClaimedMs), items: items,
		fold: &lua.GrabClaim{IndexKey: promo.RequestIndexKey(req.RequestID), Entry: b, TTLSeconds: int64(flow.RequestIndexTTL.Seconds())}}
}

func (s *Grabber) claim(ctx context.Context, req Request, hash string, items []flow.Item) claim {
	idx, b := s.indexEntry(req, hash, items)
	ttl := int64(flow.RequestIndexTTL.Seconds())
	var old string
	var err error
	if idx.HoldUntilMs > 0 { // the claim and its hold in one step (holds.go)
		old, err = s.onIndexShard(ctx, req.RequestID, func(p redis.Pipeliner) *redis.Cmd {
			return lua.QueueClaimHold(ctx, p, promo.RequestIndexKey(req.RequestID), s.cfg.HoldsKey, b, ttl, idx.HoldUntilMs, req.RequestID)
		}).Text()
	} else {
		// NX with GET: set when absent, and either way answer what was there.
		old, err = s.indexCommand(ctx, req.RequestID, "set", b, "nx", "get", "ex", ttl).Text()
	}
	switch {
	case errors.Is(err, redis.Nil):
		return claim{created: true, claimedAt: time.UnixMilli(idx.ClaimedMs), raw: string(b), items: items, holdUntilMs: idx.HoldUntilMs}
	case err != nil:
		return claim{err: err}
	}
	var prev flow.RequestIndex
	if json.Unmarshal([]byte(old), &prev) != nil || prev.BodyHash != idx.BodyHash {
		return claim{reused: true}
	}
	c := claim{raw: old, items: prev.Items, holdUntilMs: prev.HoldUntilMs}
	if prev.ClaimedMs > 0 {
		c.claimedAt = time.UnixMilli(prev.ClaimedMs)
	}
	return c
}

// inFlight answers UNAVAILABLE, retry, in place of a refusal of a send that found its
// requestId claimed by another send, which may still be on its way to its takes:
// the refusal would be definite to the checkout while that send could still be
// granted (a client that gave up on a slow first send and sent again). Once the
// first send's answer time is over it can grant nothing more, and what the ledger
// holds answers a retry (DUPLICATE). A refusal of a rebuilt claim stands.
func (s *Grabber) inFlight(req Request, c claim, res Result, now time.Time) Result {
	if c.created || c.claimedAt.IsZero() || now.Sub(c.claimedAt) > s.cfg.AnswerTimeout+time.Second {
		return res
	}
	switch res.Result {
	case Granted, Unavailable, RequestIDReused, AlreadyReturned:
		return res
	}
	return Result{RequestID: req.RequestID, Result: Unavailable,
		Message: "another send of this requestId is in flight; retry with the same requestId for its outcome"}
}

// checkClaim answers when the claim failed: REQUEST_ID_REUSED, or UNAVAILABLE when
// the index shard did not answer. done is false when the grab may go on.
func (s *Grabber) checkClaim(req Request, c claim) (Result, bool) {
	switch {
	case c.reused:
		return Result{RequestID: req.RequestID, Result: RequestIDReused, Message: "requestId already used with another body"}, true
	case c.err != nil:
		s.logErr("request index unavailable", c.err, "requestId", req.RequestID)
		return Result{RequestID: req.RequestID, Result: Unavailable, Message: "the request index shard is unavailable; nothing was taken"}, true
	}
	return Result{}, false
}

// shortCircuit answers from the local SOLD_OUT/STOPPED/ENDED/NOT_FOUND cache without
// the promotion's shard. A requestId that holds a claim may hold a grant (a retry
// after an answer was lost to a crash), and its first answer lives in the ledger, so
// it goes the full way instead; that read is on the index shard of the requestId,
// spread over every shard, never the hot promotion's. A first attempt holds no
// claim by the caller's word, so it is answered with no read at all: after a sell-out
// that is most of the traffic, and the index shards' share of it.
func (s *Grabber) shortCircuit(ctx context.Context, req Request, now time.Time) (Result, bool) {
	for i, it := range req.Items {
		r, ok := s.refusals.Get(promo.Key(it.PromoID, it.Type), now)
		if !ok || !r.holds(now) {
			continue
		}
		o := r.o
		if s.Resend(ctx, req) {
			return Result{}, false
		}
		s.Metrics.shortCircuit.WithLabelValues(string(o)).Inc()
		return refusal(req.RequestID, o, i, "answered from the local "+string(o)+" cache"), true
	}
	return Result{}, false
}

// Resend implements Service: not a first attempt, and its requestId holds a claim.
func (s *Grabber) Resend(ctx context.Context, req Request) bool {
	return !req.FirstAttempt && s.claimed(ctx, req.RequestID)
}

// claimed reports whether requestID holds a claim; when the index cannot tell, it
// says yes, so the grab takes the full way.
func (s *Grabber) claimed(ctx context.Context, requestID string) bool {
	n, err := s.indexCommand(ctx, requestID, "exists").Int64()
	return err != nil || n > 0
}

// releaseClaim removes the index entry this grab created when it ends refused, so a
// refused requestId does not hold memory for a month; a later retry claims afresh.
func (s *Grabber) releaseClaim(req Request) {
	ctx, cancel := s.settleCtx()
	defer cancel()
	err := s.indexCommand(ctx, req.RequestID, "del").Err()
	s.logErr("request index entry not released", err, "requestId", req.RequestID)
	if req.HoldSeconds > 0 {
		// Left behind, the hold would find no entry when due and be dropped then.
		err := s.dropHold(ctx, s.cfg.HoldsKey, req.RequestID)
		s.logErr("hold of a refused grab not released", err, "requestId", req.RequestID)
	}
}

// readIndex reads request rid's index entry; found is false when there is none (or
// what is there does not parse: no entry of ours).
func (s *Grabber) readIndex(ctx context.Context, rid string) (idx flow.RequestIndex, found bool, err error) {
	raw, err := s.indexCommand(ctx, rid, "get").Text()
	switch {
	case errors.Is(err, redis.Nil):
		return idx, false, nil
	case err != nil:
		return idx, false, err
	}
	return idx, json.Unmarshal([]byte(raw), &idx) == nil, nil
}

// indexCommand runs one command on requestID's index entry (name key args...).
func (s *Grabber) indexCommand(ctx context.Context, requestID, name string, args ...any) *redis.Cmd {
	key := promo.RequestIndexKey(requestID)
	return s.onIndexShard(ctx, requestID, func(p redis.Pipeliner) *redis.Cmd {
		cmd := redis.NewCmd(ctx, append([]any{name, key}, args...)...)
		_ = p.Process(ctx, cmd)
		return cmd
	})
}

// onIndexShard runs queue through the executor of the shard the ring gives
// requestID's index entry, where its holds live too (holds.go).
func (s *Grabber) onIndexShard(ctx context.Context, requestID string, queue func(redis.Pipeliner) *redis.Cmd) *redis.Cmd {
	return s.execs[s.ring.Shard(promo.RequestIndexKey(requestID))].do(ctx, queue)
}
