package grab

import (
	"context"
	"errors"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// Cancel returns every item a granted grab holds (remaining, pin and ip counters)
// and publishes a CANCEL event. The return is durable in Redis before the event is
// sent; an event Kafka does not take now is written to MySQL if its GRAB is there
// (publish.Router), else owed in the ledger and published by the reconciler, so
// the answer is RETURNED either way.
func (s *Grabber) Cancel(ctx context.Context, requestID, pin, reason string) (Result, error) {
	res, err := s.cancel(ctx, requestID, pin, reason)
	if err == nil {
		s.Metrics.cancels.WithLabelValues(string(res.Result)).Inc()
	} else {
		s.Metrics.cancels.WithLabelValues("ERROR").Inc()
	}
	return res, err
}

func (s *Grabber) cancel(ctx context.Context, rid, pin, reason string) (Result, error) {
	now := s.Clock()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AnswerTimeout)
	defer cancel()
	idx, err := s.ownedIndex(ctx, rid, pin)
	if unknown, ok := indexUnknown(rid, err); ok {
		return unknown, nil
	}
	if err != nil {
		return Result{}, err
	}
	items := indexItems(idx)
	gs := s.groups(items, idx.Pin, idx.IP)
	replies, errs := s.returnOn(ctx, gs, lua.ReturnCall{RequestID: rid, Pin: pin, Mode: lua.ReturnCancel, Reason: reason, NowMs: now.UnixMilli()})
	var returned []group
	var returnedEnvs [][]lua.Envelope // what each returned group gave back of a pool
	already, pending := 0, false
	for i, err := range errs {
		if err != nil {
			s.logErr("cancel failed on a shard", err, "requestId", rid, "shard", gs[i].shard)
			return Result{RequestID: rid, Result: Unavailable, Message: "a shard is unavailable; retry the cancel"}, nil
		}
		switch replies[i].Code {
		case lua.ReturnReturned:
			returned = append(returned, gs[i])
			returnedEnvs = append(returnedEnvs, replies[i].Envelopes)
		case lua.ReturnAlreadyReturned:
			already++
		case lua.ReturnNotFound:
			if s.shardLost(gs[i].shard) { // lostshard.go
				return Result{RequestID: rid, Result: Unavailable, Message: lostMessage(gs[i].shard)}, nil
			}
			return Result{}, ErrGrabNotFound
		default: // PENDING: not granted (yet) on this shard
			pending = true
		}
	}
	switch {
	case len(returned) == 0 && pending: // nothing granted to return
		return Result{}, ErrGrabNotFound
	case len(returned) == 0:
		return Result{RequestID: rid, Result: AlreadyReturned, Message: "already returned; nothing returned twice"}, nil
	}
	// A pool item's CANCEL carries the parts its return gave back, named by
	// return.lua even when the pool went with its deleted promotion, so the record's
	// amounts net to the unit.
	back := flowItems(items, returned, returnedEnvs)
	for _, g := range returned {
		for _, key := range g.keys {
			s.refusals.Forget(promo.BucketBase(key))
			s.buckets.empty.Forget(key)
		}
	}
	if pending {
		// Granted on some shards, still being committed on others (a crash between
		// two commits): the parts granted are returned now and owe their CANCEL, which
		// the reconciler pays as it settles the rest as the rollback of the whole
		// grab (reconcile.go). The outcome is known once it has.
		return Result{RequestID: rid, Result: Unavailable, Message: "part of this grab was still being committed; retry the cancel for the outcome"}, nil
	}
	if len(back) == 0 { // only counts went back now: the units were returned by an earlier cancel
		return Result{RequestID: rid, Result: AlreadyReturned, Message: "already returned; nothing returned twice"}, nil
	}
	if err := s.publish(ctx, s.event(flow.Cancel, rid, pin, idx.IP, back, now, reason)); err != nil {
		s.logErr("cancel event not acknowledged; the reconciler will publish it", err, "requestId", rid)
	} else {
		s.finalize(rid, pin, returned)
	}
	out := Result{RequestID: rid, Result: Returned}
	for i, it := range back {
		out.Items = append(out.Items, ItemResult{PromoID: it.PromoID, Type: it.Type, Num: it.Num})
		if len(it.Parts) > 0 {
			out.Items[i].Amount = &back[i].Amount
		}
	}
	return out, nil
}

// finalize records that the CANCEL owed for these takes has been acknowledged.
func (s *Grabber) finalize(rid, pin string, gs []group) {
	ctx, cancel := s.settleCtx()
	defer cancel()
	_, errs := s.returnOn(ctx, gs, lua.ReturnCall{RequestID: rid, Pin: pin, Mode: lua.ReturnFinalize, NowMs: s.Clock().UnixMilli()})
	for i, err := range errs {
		// Harmless: the reconciler publishes the CANCEL again and the record dedupes it.
		s.logErr("finalize failed", err, "requestId", rid, "shard", gs[i].shard)
	}
}

// lookup finds a granted request's items: the Redis request index, else the record.
// ownedIndex is the index entry of grab rid, which pin must have made: another
// pin's grab is as good as none (ErrGrabNotFound) to the caller.
func (s *Grabber) ownedIndex(ctx context.Context, rid, pin string) (flow.RequestIndex, error) {
	idx, err := s.lookup(ctx, rid)
	if err == nil && idx.Pin != pin {
		return flow.RequestIndex{}, ErrGrabNotFound
	}
	return idx, err
}

// indexItems are the items an index entry names, as a request's.
func indexItems(idx flow.RequestIndex) []Item {
	items := make([]Item, len(idx.Items))
	for i, it := range idx.Items {
		items[i] = Item{PromoID: it.PromoID, Type: it.Type, Num: it.Num, buckets: it.Buckets, bucket: it.Bucket}
	}
	return items
}

func (s *Grabber) lookup(ctx context.Context, rid string) (flow.RequestIndex, error) {
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

// errIndexUnknown: the request index shard did not answer, and the record (which
// may lag Kafka) does not hold the grab (yet): whether it exists is not known.
var errIndexUnknown = errors.New("request index unreadable and the grab not in the record")

// indexUnknown answers UNAVAILABLE, retry, for a lookup that could not tell.
func indexUnknown(rid string, err error) (Result, bool) {
	if !errors.Is(err, errIndexUnknown) {
		return Result{}, false
	}
	return Result{RequestID: rid, Result: Unavailable,
		Message: "the shard holding this grab's index did not answer and the record does not hold it yet; retry"}, true
}
