package grab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/lua"
)

// The reconciler closes the crash window. A take is written "pending" with a
// deadline before its GRAB event is sent; a process killed before the commit leaves
// it open. Past deadline + ReconcileMargin the reconciler asks the record (the dtm
// back-query): a GRAB in the flow log, with no CANCEL there or owed, means the grab
// committed, so the take is marked granted and never returned; otherwise it is
// aborted (stock back) and a CANCEL is published, which nets out a GRAB that reached
// Kafka but not yet MySQL (and is skipped as a repeat where the CANCEL is there).
// It also publishes every CANCEL still owed by an abort or a cancel.
//
// A grab of items on several shards is granted or rolled back as a whole, but its
// takes are settled one shard after another, while the record may still be
// catching up with Kafka: one take could be aborted while its GRAB was on its way to
// MySQL and the next committed once it had landed, or a take aborted beside one the
// killed process had already committed. So every take is decided by its whole
// request (grantedAsAWhole). (Found by the crash drill: a two-shard grab half
// granted after grab-service and the flow sink died together.)

// ReconcileStats counts one pass.
type ReconcileStats struct {
	Committed, Aborted, Published int
	recordDown                    error // the record failed a back-query this pass
}

// RunReconciler runs a pass at once and then every interval until ctx ends.
func (s *Service) RunReconciler(ctx context.Context, every time.Duration) error {
	return svc.Every(ctx, every, func(ctx context.Context) {
		if _, err := s.Reconcile(ctx); err != nil {
			s.logErr("reconcile pass incomplete", err)
		}
	})
}

type owed struct {
	shard int
	key   string
	rid   string
	entry lua.LedgerEntry
}

// Reconcile runs one pass over every shard. The CANCELs owed on all shards go out
// in one batch, so a pass costs one Kafka round trip, and one timeout while Kafka is down.
func (s *Service) Reconcile(ctx context.Context) (ReconcileStats, error) {
	var st ReconcileStats
	var firstErr error
	var debts []owed
	listed, sweep, now := s.passes.next(ctx, s)
	for shard, c := range s.Shards {
		sets := listed[shard]
		if sweep {
			var err error
			if sets, err = s.sweepPending(ctx, shard, c); err != nil && firstErr == nil {
				firstErr = err // what the SCAN found before it failed is still settled
			}
		}
		d, err := s.reconcileShard(ctx, shard, c, sets, &st)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		debts = append(debts, d...)
	}
	if sweep && firstErr == nil {
		s.passes.swept(now) // a shard whose sweep failed is swept again next pass
	}
	if err := s.payDebts(ctx, debts, &st); err != nil && firstErr == nil {
		firstErr = err
	}
	return st, firstErr
}

// reconcilePasses decides what a pass visits. Sweeping a shard (SCAN) costs in
// proportion to all its keys, and the request index keeps a month of entries on
// every shard: at a few million keys a shard, a sweep every second by every
// instance would keep the shard's one core busy. So a pass visits the pending sets
// of the promotions the record lists, and sweeps only every ReconcileSweepEvery (and
// at start), which also finds a pending set the record does not list (a promotion
// deleted while takes of it were open). Without a record listing, every pass sweeps.
type reconcilePasses struct {
	mu        sync.Mutex
	lastSweep time.Time
	listed    []string // the record's last answer, kept while it does not answer
}

// next returns the promotion pending keys to visit by shard, or sweep, and the
// pass's time.
func (p *reconcilePasses) next(ctx context.Context, s *Service) (map[int][]string, bool, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := s.Clock()
	if s.PromotionKeys == nil || p.lastSweep.IsZero() || now.Sub(p.lastSweep) >= s.cfg.ReconcileSweepEvery {
		return nil, true, now
	}
	keys, err := s.PromotionKeys(ctx)
	switch {
	case err == nil:
		p.listed = keys
	case p.listed == nil:
		s.logErr("the record lists no promotions; sweeping the shards instead", err)
		return nil, true, now
	default:
		s.logErr("the record lists no promotions; visiting its last list", err)
	}
	byShard := map[int][]string{}
	for _, k := range p.listed {
		shard := s.ring.Shard(k)
		byShard[shard] = append(byShard[shard], promo.PendingKey(k))
	}
	return byShard, false, now
}

// swept records a sweep of every shard that completed.
func (p *reconcilePasses) swept(at time.Time) {
	p.mu.Lock()
	p.lastSweep = at
	p.mu.Unlock()
}

// sweepPending lists every pending set of the shard matching ReconcileMatch (with
// what it found before a SCAN failed). Keys of another layout, or of another shard
// sharing this server, are passed over.
func (s *Service) sweepPending(ctx context.Context, shard int, c redis.UniversalClient) ([]string, error) {
	var sets []string
	iter := c.Scan(ctx, 0, s.cfg.ReconcileMatch, 500).Iterator()
	for iter.Next(ctx) {
		key := strings.TrimSuffix(strings.TrimPrefix(iter.Val(), "{"), "}:pending")
		if _, _, ok := promo.ParseKey(key); ok && s.ring.Shard(key) == shard {
			sets = append(sets, iter.Val())
		}
	}
	return sets, iter.Err()
}

func (s *Service) reconcileShard(ctx context.Context, shard int, c redis.UniversalClient, sets []string, st *ReconcileStats) ([]owed, error) {
	due := strconv.FormatInt(s.Clock().Add(-s.cfg.ReconcileMargin).UnixMilli(), 10)
	var debts []owed
	// The due entries of many sets in one round trip: most sets hold none.
	for chunk := range slices.Chunk(sets, dueReadsPerPipeline) {
		reads := make([]*redis.StringSliceCmd, len(chunk))
		if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, pendingKey := range chunk {
				reads[i] = p.ZRangeByScore(ctx, pendingKey, &redis.ZRangeBy{Min: "-inf", Max: due, Count: 200})
			}
			return nil
		}); err != nil {
			return debts, err
		}
		for i, pendingKey := range chunk {
			d, err := s.settleDue(ctx, shard, c, pendingKey, reads[i].Val(), st)
			debts = append(debts, d...)
			if err != nil {
				return debts, err
			}
		}
	}
	return debts, nil
}

// dueReadsPerPipeline bounds one pipeline of the reconciler's reads of due entries.
const dueReadsPerPipeline = 500

// settleDue settles the due entries rids of one pending set and returns the
// CANCELs they owe.
func (s *Service) settleDue(ctx context.Context, shard int, c redis.UniversalClient, pendingKey string, rids []string, st *ReconcileStats) ([]owed, error) {
	key := strings.TrimSuffix(strings.TrimPrefix(pendingKey, "{"), "}:pending")
	promoID, typ, _ := promo.ParseKey(key)
	var debts []owed
	for _, rid := range rids {
		e, found, err := lua.ReadLedger(ctx, c, key, rid)
		if err != nil {
			return debts, err
		}
		switch {
		case !found:
			c.ZRem(ctx, pendingKey, rid)
		case e.State == lua.LedgerPending:
			if d, err := s.settlePending(ctx, c, key, promoID, typ, rid, e, st); err != nil {
				s.logErr("settle pending take", err, "key", key, "requestId", rid)
			} else if d {
				e.State = lua.LedgerAborted
				debts = append(debts, owed{shard, key, rid, e})
			}
		case e.State == lua.LedgerAborted || e.State == lua.LedgerCancelled:
			debts = append(debts, owed{shard, key, rid, e})
		default: // settled entries do not belong in the set
			c.ZRem(ctx, pendingKey, rid)
		}
	}
	return debts, nil
}

// settlePending commits a take the record holds as granted, or aborts it; it
// reports whether a CANCEL is now owed.
func (s *Service) settlePending(ctx context.Context, c redis.UniversalClient, key, promoID string, typ int, rid string, e lua.LedgerEntry, st *ReconcileStats) (bool, error) {
	inRecord := false
	if s.Record != nil {
		// A hung MySQL must not stall the pass (and with it every owed CANCEL on every
		// shard): each back-query is bounded, and after one fails the pass asks no more.
		if st.recordDown != nil {
			return false, st.recordDown
		}
		hctx, cancel := context.WithTimeout(ctx, s.cfg.AnswerTimeout)
		var err error
		inRecord, err = s.Record.Granted(hctx, rid, promoID, typ)
		cancel()
		if err != nil {
			st.recordDown = fmt.Errorf("the record did not answer this pass: %w", err)
			return false, err // cannot tell: leave it for the next pass
		}
	}
	granted, err := s.grantedAsAWhole(ctx, rid, key, inRecord)
	if err != nil {
		return false, err // cannot tell: leave it for the next pass
	}
	if granted {
		code, err := lua.Commit(ctx, c, rid, []string{key})
		if err == nil && code == lua.CommitCommitted {
			st.Committed++
			s.Metrics.reconciled.WithLabelValues("committed").Inc()
		}
		return false, err
	}
	r, err := lua.Return(ctx, c, lua.ReturnCall{RequestID: rid, Pin: e.Pin, Mode: lua.ReturnAbort, NowMs: s.Clock().UnixMilli(), Keys: []string{key}})
	if err != nil || r.Code != lua.ReturnReturned {
		return false, err // committed meanwhile, or already aborted: nothing owed by us
	}
	st.Aborted++
	s.Metrics.reconciled.WithLabelValues("aborted").Inc()
	s.Metrics.rollbacks.WithLabelValues("reconciled").Inc()
	return true, nil
}

// grantedAsAWhole decides the pending take of request rid on promotion key by the
// whole request. A take of it already given back (A, X, C or R) means the grab was
// rolled back: no. One already committed means its GRAB was acknowledged: yes, even
// before the record holds it. Otherwise the record decides. A yes commits the other
// takes first: commit turns pending into granted atomically per shard, so whichever
// of two reconcilers reaches a take first decides it for both (committed, no abort
// follows; aborted, this commit refuses and the answer turns to no).
func (s *Service) grantedAsAWhole(ctx context.Context, rid, key string, inRecord bool) (bool, error) {
	idx, err := s.lookup(ctx, rid)
	if err != nil && !errors.Is(err, ErrGrabNotFound) {
		return false, fmt.Errorf("the items of %s: %w", rid, err)
	}
	var others []Item // none known without an index entry or a GRAB: the take alone
	for _, it := range idx.Items {
		if promo.Key(it.PromoID, it.Type) != key {
			others = append(others, Item{PromoID: it.PromoID, Type: it.Type, Num: it.Num})
		}
	}
	gs := s.groups(others)
	if !inRecord {
		committed, err := s.anyCommitted(ctx, rid, gs)
		if err != nil || !committed {
			return false, err
		}
	}
	for _, g := range gs {
		code, err := lua.Commit(ctx, s.Shards[g.shard], rid, g.keys)
		if err != nil {
			return false, err
		}
		if code == lua.CommitReturned {
			return false, nil
		}
	}
	return true, nil
}

// anyCommitted reports whether one of request rid's takes in gs is committed.
func (s *Service) anyCommitted(ctx context.Context, rid string, gs []group) (bool, error) {
	for _, g := range gs {
		for _, key := range g.keys {
			e, found, err := lua.ReadLedger(ctx, s.Shards[g.shard], key, rid)
			if err != nil {
				return false, err
			}
			if found && e.State == lua.LedgerCommitted {
				return true, nil
			}
		}
	}
	return false, nil
}

// payDebts publishes the owed CANCEL events in one batch and finalizes them.
func (s *Service) payDebts(ctx context.Context, debts []owed, st *ReconcileStats) error {
	if len(debts) == 0 {
		return nil
	}
	now := s.Clock()
	events := make([]flow.Event, len(debts))
	for i, d := range debts {
		promoID, typ, _ := promo.ParseKey(d.key)
		reason := d.entry.Reason
		if reason == "" {
			reason = "ROLLBACK"
		}
		item := flow.Item{PromoID: promoID, Type: typ, Num: d.entry.Num, Shard: d.shard}
		events[i] = s.event(flow.Cancel, d.rid, d.entry.Pin, d.entry.IP, []flow.Item{item}, now, reason)
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.AnswerTimeout)
	defer cancel()
	if err := s.publish(pctx, events...); err != nil {
		return err
	}
	for _, d := range debts {
		if _, err := lua.Return(ctx, s.Shards[d.shard], lua.ReturnCall{RequestID: d.rid, Pin: d.entry.Pin, Mode: lua.ReturnFinalize, NowMs: now.UnixMilli(), Keys: []string{d.key}}); err != nil {
			return err
		}
		st.Published++
	}
	s.Metrics.reconciled.WithLabelValues("cancel_published").Add(float64(len(debts)))
	return nil
}
