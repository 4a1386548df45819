package grab

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/lua"
)

// Holds (seed 003: 12306 returns a ticket left unpaid). A grab with holdSeconds
// is granted as usual, but unless the checkout service confirms it
// (POST /v1/grab/{requestId}/confirm) within holdSeconds, the platform returns it
// as a cancel with reason PAYMENT_EXPIRED, exactly once.
//
// The hold lives beside the grab's request index entry, on the shard the ring
// gives the requestId: a sorted set of requestIds by deadline. The claim registers
// it in the same script call (claimhold.lua), and every take follows the claim,
// so a held grant always has its hold, whatever crashes where. Its deadline counts
// from the claim plus AnswerTimeout, so a hold never ends before the holdSeconds
// after its GRANTED answer. Each reconciler pass leases the holds due on every
// shard (holddue.lua moves them into an "expiring" set, each leased to one
// instance at a time) and returns them through the ordinary cancel, which is
// idempotent: a return that a crash interrupted is taken up again when its lease
// ends, and a second return answers ALREADY_RETURNED and publishes nothing. A
// confirm removes the hold; confirm and expiry meet in one atomic step (the ZREM
// of the hold, or its move to expiring), so exactly one of them wins.

// MaxHoldSeconds bounds holdSeconds: a day.
const MaxHoldSeconds = 86_400

// holdLease is how long an instance holds the return of an expired hold before
// another may take it up.
const holdLease = 30 * time.Second

// holdsPerPass bounds the holds one pass returns per shard.
const holdsPerPass = 200

// expiringKey is where the holds being returned wait, beside holdsKey.
func expiringKey(holdsKey string) string { return holdsKey + ":expiring" }

// holdDeadline is when a grab claimed at now with holdSeconds stops holding.
func (s *Grabber) holdDeadline(now time.Time, holdSeconds int) time.Time {
	return now.Add(s.cfg.AnswerTimeout + time.Duration(holdSeconds)*time.Second)
}

// Confirm keeps a held grant: its hold is removed and the grant stands. A grant
// without a hold, or already confirmed, confirms again as CONFIRMED; one whose
// hold ran out (or that was cancelled) answers ALREADY_RETURNED.
func (s *Grabber) Confirm(ctx context.Context, rid, pin string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AnswerTimeout)
	defer cancel()
	idx, err := s.ownedIndex(ctx, rid, pin)
	if unknown, ok := indexUnknown(rid, err); ok {
		return unknown, nil
	}
	if err != nil {
		return Result{}, err
	}
	confirmed := Result{RequestID: rid, Result: Confirmed, Message: "the grant stands; its hold is lifted"}
	expired := Result{RequestID: rid, Result: AlreadyReturned, Message: "the hold ran out before the confirm; the grant was returned"}
	unavailable := Result{RequestID: rid, Result: Unavailable, Message: "a shard is unavailable; retry the confirm"}
	// The hold's deadline, its removal and a look at the expiring set, in one pipeline.
	var deadline, removed *redis.Cmd
	expiring := s.onIndexShard(ctx, rid, func(p redis.Pipeliner) *redis.Cmd {
		deadline = redis.NewCmd(ctx, "zscore", s.cfg.HoldsKey, rid)
		_ = p.Process(ctx, deadline)
		removed = redis.NewCmd(ctx, "zrem", s.cfg.HoldsKey, rid)
		_ = p.Process(ctx, removed)
		c := redis.NewCmd(ctx, "zscore", expiringKey(s.cfg.HoldsKey), rid)
		_ = p.Process(ctx, c)
		return c
	})
	if removed == nil { // never queued: the shard's queue stayed full
		return unavailable, nil
	}
	if n, err := removed.Int64(); err != nil {
		s.logErr("confirm: holds unreadable", err, "requestId", rid)
		return unavailable, nil
	} else if n == 1 {
		// The hold is lifted; the grant stands once the record has the CONFIRM, or
		// the hold goes back and the checkout retries.
		if !s.recordConfirm(ctx, idx, rid) {
			until, _ := deadline.Float64()
			err := s.onIndexShard(ctx, rid, func(p redis.Pipeliner) *redis.Cmd {
				c := redis.NewCmd(ctx, "zadd", s.cfg.HoldsKey, "nx", until, rid)
				_ = p.Process(ctx, c)
				return c
			}).Err()
			s.logErr("confirm: the hold could not be put back; the grant stands without one, open in the record", err, "requestId", rid)
			return Result{RequestID: rid, Result: Unavailable, Message: "the confirm was not recorded; the hold stands; retry the confirm"}, nil
		}
		return confirmed, nil
	}
	switch err := expiring.Err(); {
	case err == nil:
		return expired, nil
	case !errors.Is(err, redis.Nil):
		s.logErr("confirm: expiring holds unreadable", err, "requestId", rid)
		return unavailable, nil
	}
	// No hold: never held, confirmed before, or returned. The ledgers tell.
	var states []string
	for _, g := range s.groups(indexItems(idx), idx.Pin, idx.IP) {
		for _, key := range g.keys {
			e, found, err := lua.ReadLedger(ctx, s.Shards[g.shard], key, rid)
			switch {
			case err != nil:
				s.logErr("confirm: ledger unreadable", err, "requestId", rid, "shard", g.shard)
				return unavailable, nil
			case !found:
				return Result{}, ErrGrabNotFound
			}
			states = append(states, e.State)
		}
	}
	switch {
	case slices.Contains(states, lua.LedgerPending):
		return Result{RequestID: rid, Result: Unavailable, Message: "the grab is still being committed; retry the confirm"}, nil
	case slices.ContainsFunc(states, func(st string) bool { return st != lua.LedgerCommitted }):
		return Result{RequestID: rid, Result: AlreadyReturned, Message: "the grant was returned"}, nil
	}
	// A held grant confirmed before: its CONFIRM again (the record keeps the first),
	// for a confirm whose publish a crash cut off between the hold's removal and
	// its answer.
	if idx.HoldUntilMs > 0 && !s.recordConfirm(ctx, idx, rid) {
		return unavailable, nil
	}
	return confirmed, nil
}

// recordConfirm publishes the CONFIRM of a held grant and reports whether it was
// acknowledged: a rebuilt shard then restores no hold for it (docs/CONTRACT.md,
// "Holds").
func (s *Grabber) recordConfirm(ctx context.Context, idx flow.RequestIndex, rid string) bool {
	ev := s.event(flow.Confirm, rid, idx.Pin, idx.IP, idx.Items, s.Clock(), "")
	if err := s.publish(ctx, ev); err != nil {
		s.logErr("confirm: CONFIRM not acknowledged", err, "requestId", rid)
		return false
	}
	return true
}

// expireHolds returns the holds due on every shard not fenced (reconcile.go runs
// it each pass). It counts what it returned and reports the first failure.
func (s *Reconciler) expireHolds(ctx context.Context, now time.Time) (int, error) {
	var firstErr error
	returned := 0
	for shard, exec := range s.execs {
		if s.Fence.Fenced(shard) {
			continue // its entries wait for the rebuild
		}
		rids, err := lua.ParseHoldsDue(exec.do(ctx, func(p redis.Pipeliner) *redis.Cmd {
			return lua.QueueHoldsDue(ctx, p, s.cfg.HoldsKey, expiringKey(s.cfg.HoldsKey), now.UnixMilli(), holdLease.Milliseconds(), holdsPerPass)
		}))
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		for _, rid := range rids {
			done, err := s.expireHold(ctx, rid)
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
			}
			if !done {
				continue // taken up again when its lease ends
			}
			if err := s.dropHold(ctx, expiringKey(s.cfg.HoldsKey), rid); err != nil {
				firstErr = cmp.Or(firstErr, err)
			}
			returned++
		}
	}
	return returned, firstErr
}

// expireHold returns one expired hold through the cancel path; done means its
// return is definite (returned now or before, or nothing to return).
func (s *Reconciler) expireHold(ctx context.Context, rid string) (done bool, err error) {
	idx, found, err := s.readIndex(ctx, rid)
	switch {
	case err != nil:
		return false, err
	case !found: // the grab was refused (its claim released) or its entry is gone
		return true, nil
	}
	res, err := s.Cancel(ctx, rid, idx.Pin, "PAYMENT_EXPIRED")
	switch {
	case errors.Is(err, ErrGrabNotFound):
		return true, nil
	case err != nil:
		return false, err
	case res.Result == Returned || res.Result == AlreadyReturned:
		s.Metrics.reconciled.WithLabelValues("hold_expired").Inc()
		return true, nil
	}
	return false, nil // UNAVAILABLE, or a part still being committed: next lease
}

// dropHold removes rid from the holds set key, on the shard of rid's index entry.
func (s *Grabber) dropHold(ctx context.Context, key, rid string) error {
	return s.onIndexShard(ctx, rid, func(p redis.Pipeliner) *redis.Cmd {
		c := redis.NewCmd(ctx, "zrem", key, rid)
		_ = p.Process(ctx, c)
		return c
	}).Err()
}
