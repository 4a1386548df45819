package grab

import (
	"context"
	"errors"
	"fmt"
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

// requestIndex is the request index as the grab path uses it: the claim of a
// requestId (and its hold), where a request's takes are, and its release.
type requestIndex struct {
	*core
}

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
func (s *requestIndex) indexEntry(req Request, hash string, items []flow.Item) (flow.RequestIndex, []byte) {
	now := s.Clock()
	idx := flow.RequestIndex{BodyHash: hash, Pin: req.Pin, IP: req.IP, Items: items, ClaimedMs: now.UnixMilli()}
	if req.HoldSeconds > 0 {
		idx.HoldUntilMs = s.cfg.holdDeadline(now, req.HoldSeconds).UnixMilli()
	}
	return idx, idx.AppendJSON(make([]byte, 0, 192))
}

// foldsClaim reports whether a grab's claim can be made by its take's own q.lua
// call, in the same step: one shard holds all its items (of a bucketed promotion,
// every part of the grab: its stock from its pin's home, its ip counted nowhere),
// and the ring puts the requestId's index entry on that shard too (a checkout may
// derive its requestIds so: docs/CONTRACT.md, "Request index"), with no hold,
// whose claim does more than q.lua's. A round trip to another shard less.
func (s *requestIndex) foldsClaim(req Request, gs []group) bool {
	if !s.cfg.FoldClaim || len(gs) != 1 || req.HoldSeconds > 0 {
		return false
	}
	return gs[0].shard == s.ring.Shard(promo.RequestIndexKey(req.RequestID))
}

// movesTakes reports whether a take's answer sends a bucketed grab elsewhere
// (a stock bucket sold out, a layout learned, the ip to be counted): the
// fall-over rewrites the claim, which a folded take never wrote, so such a grab
// goes again with its claim made apart.
func movesTakes(gs []group, code lua.Code) bool {
	if code != lua.CodeSoldOut && code != lua.CodeBucketed && code != lua.CodeIPPartNeeded {
		return false
	}
	for _, p := range gs[0].parts {
		if p != "" {
			return true
		}
	}
	return false
}

// foldedClaim is the claim a take will make (foldsClaim): not created until it has.
// It keeps no raw entry: only a fall-over rewrites one, and a folded grab has none.
func (s *requestIndex) foldedClaim(req Request, hash string, items []flow.Item) claim {
	idx, b := s.indexEntry(req, hash, items)
	return claim{claimedAt: time.UnixMilli(idx.ClaimedMs), items: items,
		fold: &lua.GrabClaim{IndexKey: promo.RequestIndexKey(req.RequestID), Entry: b, TTLSeconds: int64(flow.RequestIndexTTL.Seconds())}}
}

func (s *requestIndex) claim(ctx context.Context, req Request, hash string, items []flow.Item) claim {
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
	prev, perr := flow.DecodeRequestIndex([]byte(old))
	if perr != nil || prev.BodyHash != idx.BodyHash {
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
func (s *requestIndex) inFlight(req Request, c claim, res Result, now time.Time) Result {
	if c.created || c.claimedAt.IsZero() || now.Sub(c.claimedAt) > s.cfg.AnswerTimeout+time.Second {
		return res
	}
	switch res.Result {
	case Granted, Unavailable, RequestIDReused, AlreadyReturned:
		return res
	}
	return inFlightAnswer(req.RequestID)
}

func inFlightAnswer(rid string) Result {
	return unavailable(rid, Undecided, nil, "another send of this requestId is in flight; retry with the same requestId for its outcome")
}

// checkClaim answers when the claim failed: REQUEST_ID_REUSED, or UNAVAILABLE when
// the index shard did not answer. done is false when the grab may go on.
func (s *requestIndex) checkClaim(req Request, c claim) (Result, bool) {
	switch {
	case c.reused:
		return Result{RequestID: req.RequestID, Result: RequestIDReused, Message: "requestId already used with another body"}, true
	case c.err != nil:
		s.logErr("request index unavailable", c.err, "requestId", req.RequestID)
		return unavailable(req.RequestID, NothingTaken, nil, "the request index shard is unavailable; nothing was taken"), true
	}
	return Result{}, false
}

// claimed reports whether requestID holds a claim; an index that cannot tell is an
// error, which the callers answer UNAVAILABLE (fail closed: read as "yes", it let a
// request past the method limit and the degrade cap).
func (s *requestIndex) claimed(ctx context.Context, requestID string) (bool, error) {
	n, err := s.indexCommand(ctx, requestID, "exists").Int64()
	if err != nil {
		return false, fmt.Errorf("whether %s holds a claim: %w", requestID, err)
	}
	return n > 0, nil
}

// releaseClaim removes the index entry this grab created when it ends refused, so a
// refused requestId does not hold memory for a month; a later retry claims afresh.
func (s *requestIndex) releaseClaim(req Request) {
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
func (s *requestIndex) readIndex(ctx context.Context, rid string) (idx flow.RequestIndex, found bool, err error) {
	raw, err := s.indexCommand(ctx, rid, "get").Text()
	switch {
	case errors.Is(err, redis.Nil):
		return idx, false, nil
	case err != nil:
		return idx, false, err
	}
	idx, err = flow.DecodeRequestIndex([]byte(raw))
	return idx, err == nil, nil
}

// indexCommand runs one command on requestID's index entry (name key args...).
func (s *requestIndex) indexCommand(ctx context.Context, requestID, name string, args ...any) *redis.Cmd {
	key := promo.RequestIndexKey(requestID)
	return s.onIndexShard(ctx, requestID, func(p redis.Pipeliner) *redis.Cmd {
		cmd := redis.NewCmd(ctx, append([]any{name, key}, args...)...)
		_ = p.Process(ctx, cmd)
		return cmd
	})
}

// onIndexShard runs queue through the executor of the shard the ring gives
// requestID's index entry, where its holds live too (holds.go).
func (s *requestIndex) onIndexShard(ctx context.Context, requestID string, queue func(redis.Pipeliner) *redis.Cmd) *redis.Cmd {
	return s.execs[s.ring.Shard(promo.RequestIndexKey(requestID))].do(ctx, queue)
}

// followClaim points the items of a send that found its requestId claimed at the
// buckets the claim names: the index must name the takes the ledgers hold,
// whichever send made them. While the claim is young, the send that made it may
// still be moving a bucketed grab's takes from bucket to bucket, so this one
// waits its turn (503, retry with the same requestId) rather than take beside it.
func (s *requestIndex) followClaim(req Request, c claim, now time.Time) (Result, bool) {
	bucketed := false
	for i := range req.Items {
		it := &req.Items[i]
		if i < len(c.items) && c.items[i].PromoID == it.PromoID && c.items[i].Type == it.Type {
			it.buckets, it.bucket, it.noIP = max(c.items[i].Buckets, 1), c.items[i].Bucket, c.items[i].NoIP
		}
		bucketed = bucketed || it.buckets > 1
	}
	if bucketed && !c.claimedAt.IsZero() && now.Sub(c.claimedAt) <= s.cfg.AnswerTimeout+time.Second {
		return inFlightAnswer(req.RequestID), true
	}
	return Result{}, false
}

// mayFallOver reports whether this send of the grab may move its takes: the send
// that made the claim, or one made when no other send can still be on its way
// (the claim older than an answer time). Each move is a compare and set of the
// index entry (reclaim), so of two such sends only one moves the takes.
func (s *requestIndex) mayFallOver(c claim, now time.Time) bool {
	return c.created || c.claimedAt.IsZero() || now.Sub(c.claimedAt) > s.cfg.AnswerTimeout+time.Second
}

// reclaim rewrites the grab's index entry with its items where the next attempt
// takes them, keeping its claim time and its expiry, if the entry is still the
// one c last saw (moved false otherwise: another send moved the takes). A cancel
// and the reconciler find a request's takes there.
func (s *requestIndex) reclaim(ctx context.Context, req Request, hash string, items []flow.Item, c *claim) (moved bool, err error) {
	idx := flow.RequestIndex{BodyHash: hash, Pin: req.Pin, IP: req.IP, Items: items, HoldUntilMs: c.holdUntilMs}
	if !c.claimedAt.IsZero() {
		idx.ClaimedMs = c.claimedAt.UnixMilli()
	}
	entry := idx.AppendJSON(nil)
	n, err := s.onIndexShard(ctx, req.RequestID, func(p redis.Pipeliner) *redis.Cmd {
		return lua.QueueReclaim(ctx, p, promo.RequestIndexKey(req.RequestID), c.raw, entry)
	}).Int64()
	if err != nil || n == 0 {
		return false, err
	}
	c.raw, c.items = string(entry), items
	return true, nil
}

// dropHold removes rid from the holds set key, on the shard of rid's index entry.
func (s *requestIndex) dropHold(ctx context.Context, key, rid string) error {
	return s.onIndexShard(ctx, rid, func(p redis.Pipeliner) *redis.Cmd {
		c := redis.NewCmd(ctx, "zrem", key, rid)
		_ = p.Process(ctx, c)
		return c
	}).Err()
}

// lookup finds a granted request's items: the Redis request index, else the record.
// ownedIndex is the index entry of grab rid, which pin must have made: another
// pin's grab is as good as none (ErrGrabNotFound) to the caller.
func (s *requestIndex) ownedIndex(ctx context.Context, rid, pin string) (flow.RequestIndex, error) {
	idx, err := s.lookup(ctx, rid)
	if err == nil && idx.Pin != pin {
		return flow.RequestIndex{}, ErrGrabNotFound
	}
	return idx, err
}

func (s *requestIndex) lookup(ctx context.Context, rid string) (flow.RequestIndex, error) {
	idx, found, err := s.readIndex(ctx, rid)
	if found {
		return idx, nil
	}
	if err != nil {
		s.logErr("request index unreadable; asking the record", err, "requestId", rid)
	}
	if s.Record == nil {
		return idx, ErrGrabNotFound
	}
	readErr := err
	pin, ip, items, err := s.Record.GrabItems(ctx, rid)
	if err != nil {
		return idx, err
	}
	if len(items) == 0 && readErr != nil {
		// The record lags Kafka by the sink's batch: silence there proves nothing
		// while the index itself did not answer.
		return idx, errIndexUnknown
	}
	if len(items) == 0 {
		return idx, ErrGrabNotFound
	}
	return flow.RequestIndex{Pin: pin, IP: ip, Items: items}, nil
}
