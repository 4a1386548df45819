package grab

import (
	"context"
	"slices"
	"time"

	"github.com/flashsale/platform/internal/fanout"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/lua"
	"github.com/redis/go-redis/v9"
)

// settler ends what takes began: it undoes, aborts, commits and returns them on
// the shards, and publishes their flow events. The grab path, the cancel path and
// the reconciler share it.
type settler struct {
	*core
	guard *shardGuard
}

// undo gives back takes whose GRAB was never published: the ledger forgets them.
// It reports whether every shard did.
func (s *settler) undo(req Request, gs []group) bool {
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

// rolledBack answers a grab that could not be committed. When the rollback did
// not finish (a shard did not answer), the reconciler settles the takes left open
// by the record, which may hold the GRAB: then the grant stands, so the buyer is
// told to ask again with the same requestId rather than that nothing was taken.
func rolledBack(rid string, settled bool) Result {
	if !settled {
		return unavailable(rid, Undecided, nil, "the grab could not be committed and its rollback has not finished; retry with the same requestId for the outcome")
	}
	return unavailable(rid, RolledBack, nil, "the grab could not be committed; nothing was taken")
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
func (s *settler) abort(req Request, gs []group, taken [][]lua.Envelope, published bool) bool {
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
		back, envs, ok := s.cancelCommitted(ctx, req, committed, call)
		owing, owingEnvs, settled = append(owing, back...), append(owingEnvs, envs...), settled && ok
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

// cancelCommitted gives back the parts of an aborted grab that were committed
// (ROLLBACK): it answers those returned now, owing their CANCEL, with what they
// gave back of a pool, and whether every part answered.
func (s *settler) cancelCommitted(ctx context.Context, req Request, committed []group, call lua.ReturnCall) ([]group, [][]lua.Envelope, bool) {
	call.Mode, call.Reason = lua.ReturnCancel, "ROLLBACK"
	replies, errs := s.returnOn(ctx, committed, call)
	var owing []group
	var envs [][]lua.Envelope
	settled := true
	for i, err := range errs {
		s.logErr("rollback of a committed part failed", err, "requestId", req.RequestID, "shard", committed[i].shard)
		switch {
		case err != nil:
			settled = false
		case replies[i].Code == lua.ReturnReturned:
			owing = append(owing, committed[i])
			envs = append(envs, replies[i].Envelopes)
		}
	}
	return owing, envs, settled
}

// publishRollback publishes the CANCEL (ROLLBACK) of the groups' items, with the
// pool parts envs says each group gave back (flowItems), and reports whether
// Kafka took it. An item whose entry is gone has nothing left in Redis to owe its
// CANCEL, so it is paid here or the rebuild would restore the grant
// (docs/design.md, "Rollbacks and owed CANCELs").
func (s *settler) publishRollback(ctx context.Context, req Request, gs []group, envs [][]lua.Envelope) bool {
	items := flowItems(req.Items, gs, envs)
	if len(items) == 0 { // parts that count a pin or an ip only: never a unit of the record
		return true
	}
	ev := newEvent(flow.Cancel, req.RequestID, req.Pin, req.IP, items, s.Clock(), "ROLLBACK")
	if err := s.publish(ctx, ev); err != nil {
		s.logErr("rollback CANCEL not acknowledged; an entry still owing it is published by the reconciler, one already gone is reported by `recovery verify`",
			err, "requestId", req.RequestID)
		return false
	}
	return true
}

// commit marks every take granted and records where the request's items live.
func (s *settler) commit(ctx context.Context, req Request, gs []group) bool {
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

func newEvent(kind flow.Kind, rid, pin, ip string, items []flow.Item, at time.Time, reason string) flow.Event {
	return flow.Event{EventID: newEventID(), Kind: kind, RequestID: rid, Pin: pin, IP: ip,
		Items: items, OccurredAt: flow.Stamp(at), Reason: reason}
}

func (s *settler) publish(ctx context.Context, events ...flow.Event) error {
	start := time.Now()
	err := s.Publisher.Publish(ctx, events...)
	s.Metrics.kafkaLatency.Observe(time.Since(start).Seconds())
	if err != nil {
		s.Metrics.kafkaErrors.WithLabelValues(string(events[0].Kind)).Inc()
	}
	return err
}

// returnOn runs return.lua in mode on every group and reports each reply.
func (s *settler) returnOn(ctx context.Context, gs []group, call lua.ReturnCall) ([]lua.ReturnReply, []error) {
	replies := make([]lua.ReturnReply, len(gs))
	errs := make([]error, len(gs))
	fanout.Each(gs, func(i int, g group) {
		if errs[i] = s.guard.fenceCancel(call, g.shard); errs[i] != nil {
			return
		}
		c := call
		c.Keys, c.Outbox = g.keys, s.cfg.StateOutboxKey
		replies[i], errs[i] = lua.ParseReturn(s.execs[g.shard].do(ctx, func(p redis.Pipeliner) *redis.Cmd {
			return lua.QueueReturn(ctx, p, c)
		}))
		s.post(g.shard, replies[i].Changes)
	})
	return replies, errs
}

// finalize records that the CANCEL owed for these takes has been acknowledged.
func (s *settler) finalize(rid, pin string, gs []group) {
	ctx, cancel := s.settleCtx()
	defer cancel()
	_, errs := s.returnOn(ctx, gs, lua.ReturnCall{RequestID: rid, Pin: pin, Mode: lua.ReturnFinalize, NowMs: s.Clock().UnixMilli()})
	for i, err := range errs {
		// Harmless: the reconciler publishes the CANCEL again and the record dedupes it.
		s.logErr("finalize failed", err, "requestId", rid, "shard", gs[i].shard)
	}
}
