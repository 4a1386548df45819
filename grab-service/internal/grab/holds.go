package grab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// Holds (seed 003): a held grant not confirmed within holdSeconds is returned as a
// PAYMENT_EXPIRED cancel, exactly once. The hold sits beside the request index
// entry, registered by the claim's own script call, and expiry leases due holds
// to one instance at a time: docs/design.md, "Holds, in full".

// MaxHoldSeconds bounds holdSeconds: a day.
const MaxHoldSeconds = 86_400

// holdLease is how long an instance holds the return of an expired hold before
// another may take it up.
const holdLease = 30 * time.Second

// holdsPerPass bounds the holds one pass returns per shard.
const holdsPerPass = 200

// Confirm keeps a held grant: its hold is moved aside, the CONFIRM published, and
// only the acknowledgement lifts it for good; unacknowledged, it goes back at its
// deadline. So a CONFIRMED answer is always in the record (docs/design.md, "Holds,
// in full"). A cancelled or expired grant answers ALREADY_RETURNED.
func (s *Grabber) Confirm(ctx context.Context, rid, pin string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AnswerTimeout)
	defer cancel()
	unavailable := Result{RequestID: rid, Result: Unavailable, Message: "a shard is unavailable; retry the confirm"}
	// A lost index shard's entry and hold come back with its rebuild; until then the
	// record could tell the grant but not its hold.
	indexShard := s.ring.Shard(promo.RequestIndexKey(rid))
	rebuilding := Result{RequestID: rid, Result: Unavailable, Message: fmt.Sprintf("shard %d is being rebuilt; retry the confirm shortly", indexShard)}
	if s.Fence.Fenced(indexShard) {
		return rebuilding, nil
	}
	idx, err := s.index.ownedIndex(ctx, rid, pin)
	if unknown, ok := indexUnknown(rid, err); ok {
		return unknown, nil
	}
	if err != nil {
		return Result{}, err
	}
	lift, _, err := lua.ParseLiftHold(s.index.onIndexShard(ctx, rid, func(p redis.Pipeliner) *redis.Cmd {
		return lua.QueueLiftHold(ctx, p, s.cfg.HoldsKey, rid)
	}))
	if err != nil {
		s.logErr("confirm: holds unreadable", err, "requestId", rid)
		return unavailable, nil
	}
	if lift == lua.HoldExpiring {
		return Result{RequestID: rid, Result: AlreadyReturned, Message: "the hold ran out before the confirm; the grant was returned"}, nil
	}
	// The ledgers say whether the grant stands: a cancelled grant keeps its hold
	// until it is due, and a grab still being committed has one too.
	if res, stands, err := s.grantStands(ctx, idx, rid); !stands {
		if lift == lua.HoldLifted {
			s.settleHold(rid, err != nil || res.Result == Unavailable) // back unless returned
		}
		return res, err
	}
	confirmed := Result{RequestID: rid, Result: Confirmed, Message: "the grant stands; its hold is lifted"}
	if lift == lua.HoldNone && idx.HoldUntilMs == 0 {
		// No hold, ever, so nothing to record: unless the index shard came back empty
		// before the fence saw it, and the entry and hold were lost with it.
		if s.guard.shardLost(indexShard) {
			return rebuilding, nil
		}
		return confirmed, nil
	}
	// Held: lifted now, aside for another confirm, or lifted before (its CONFIRM
	// again, for a confirm a crash cut off: the record keeps the first).
	ev := newEvent(flow.Confirm, rid, idx.Pin, idx.IP, idx.Items, s.Clock(), "")
	if err := s.settle.publish(ctx, ev); err != nil {
		s.logErr("confirm: CONFIRM not acknowledged", err, "requestId", rid)
		if lift == lua.HoldLifted {
			s.settleHold(rid, true)
		}
		return Result{RequestID: rid, Result: Unavailable, Message: "the confirm was not recorded; the hold stands; retry the confirm"}, nil
	}
	if lift != lua.HoldNone {
		s.settleHold(rid, false)
	}
	return confirmed, nil
}

// grantStands reads the request's ledger entries: stands is true when every one is
// committed; otherwise res is the confirm's answer (returned, still being
// committed, or a shard unavailable), or err ErrGrabNotFound.
func (s *Grabber) grantStands(ctx context.Context, idx flow.RequestIndex, rid string) (res Result, stands bool, err error) {
	var states []string
	for _, g := range s.route.groups(indexItems(idx), idx.Pin, idx.IP) {
		for _, key := range g.keys {
			e, found, err := lua.ReadLedger(ctx, s.Shards[g.shard], key, rid)
			switch {
			case err != nil:
				s.logErr("confirm: ledger unreadable", err, "requestId", rid, "shard", g.shard)
				return Result{RequestID: rid, Result: Unavailable, Message: "a shard is unavailable; retry the confirm"}, false, nil
			case !found && s.guard.shardLost(g.shard): // gone with its server, until the rebuild
				return Result{RequestID: rid, Result: Unavailable, Message: lostMessage(g.shard)}, false, nil
			case !found:
				return Result{}, false, ErrGrabNotFound
			}
			states = append(states, e.State)
		}
	}
	switch {
	case slices.Contains(states, lua.LedgerPending):
		return Result{RequestID: rid, Result: Unavailable, Message: "the grab is still being committed; retry the confirm"}, false, nil
	case slices.ContainsFunc(states, func(st string) bool { return st != lua.LedgerCommitted }):
		return Result{RequestID: rid, Result: AlreadyReturned, Message: "the grant was returned"}, false, nil
	}
	return Result{}, true, nil
}

// settleHold ends a lift: back puts the hold back at its deadline (unless an
// acknowledged confirm took it meanwhile), else it leaves the confirming set for
// good. On a context of its own: the confirm's may be spent by a slow publish.
func (s *Grabber) settleHold(rid string, back bool) {
	ctx, cancel := s.settleCtx()
	defer cancel()
	err := s.index.onIndexShard(ctx, rid, func(p redis.Pipeliner) *redis.Cmd {
		if back {
			return lua.QueueRestoreHold(ctx, p, s.cfg.HoldsKey, rid)
		}
		c := redis.NewCmd(ctx, "zrem", promo.ConfirmingKey(s.cfg.HoldsKey), rid)
		_ = p.Process(ctx, c)
		return c
	}).Err()
	s.logErr("confirm: the hold left aside; the grant stands without a hold until a confirm of it is acknowledged", err, "requestId", rid, "back", back)
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
			return lua.QueueHoldsDue(ctx, p, s.cfg.HoldsKey, promo.ExpiringKey(s.cfg.HoldsKey), now.UnixMilli(), holdLease.Milliseconds(), holdsPerPass)
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
			if err := s.index.dropHold(ctx, promo.ExpiringKey(s.cfg.HoldsKey), rid); err != nil {
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
	idx, found, err := s.index.readIndex(ctx, rid)
	switch {
	case err != nil:
		return false, err
	case !found: // the grab was refused (its claim released) or its entry is gone
		return true, nil
	}
	res, err := s.cancel.Cancel(ctx, rid, idx.Pin, "PAYMENT_EXPIRED")
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
