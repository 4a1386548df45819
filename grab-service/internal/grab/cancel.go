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
	idx, err := s.index.ownedIndex(ctx, rid, pin)
	if unknown, ok := indexUnknown(rid, err); ok {
		return unknown, nil
	}
	if err != nil {
		return Result{}, err
	}
	items := indexItems(idx)
	gs := s.route.groups(items, idx.Pin, idx.IP)
	r, res, done, err := s.returnAll(ctx, gs, lua.ReturnCall{RequestID: rid, Pin: pin, Mode: lua.ReturnCancel, Reason: reason, NowMs: now.UnixMilli()})
	if done || err != nil {
		return res, err
	}
	switch {
	case len(r.returned) == 0 && r.pending: // nothing granted to return
		return Result{}, ErrGrabNotFound
	case len(r.returned) == 0:
		return Result{RequestID: rid, Result: AlreadyReturned, Message: "already returned; nothing returned twice"}, nil
	}
	// A pool item's CANCEL carries the parts its return gave back, named by
	// return.lua even when the pool went with its deleted promotion.
	back := flowItems(items, r.returned, r.envs)
	for _, g := range r.returned {
		for _, key := range g.keys {
			s.refusals.Forget(promo.BucketBase(key))
			s.route.empty.Forget(key)
		}
	}
	if r.pending {
		// Granted on some shards, still being committed on others (a crash between
		// two commits): the reconciler settles the rest as the rollback of the whole.
		return Result{RequestID: rid, Result: Unavailable, Message: "part of this grab was still being committed; retry the cancel for the outcome"}, nil
	}
	if len(back) == 0 { // only counts went back now: the units were returned by an earlier cancel
		return Result{RequestID: rid, Result: AlreadyReturned, Message: "already returned; nothing returned twice"}, nil
	}
	if err := s.settle.publish(ctx, newEvent(flow.Cancel, rid, pin, idx.IP, back, now, reason)); err != nil {
		s.logErr("cancel event not acknowledged; the reconciler will publish it", err, "requestId", rid)
	} else {
		s.settle.finalize(rid, pin, r.returned)
	}
	return returnedResult(rid, back), nil
}

// returns is what the shards answered a cancel's returns.
type returns struct {
	returned []group
	envs     [][]lua.Envelope // what each returned group gave back of a pool
	pending  bool             // a part not granted (yet) on its shard
}

// returnAll returns the grab's takes on every shard; done answers a shard that
// failed, or that lost the grab.
func (s *Grabber) returnAll(ctx context.Context, gs []group, call lua.ReturnCall) (r returns, res Result, done bool, err error) {
	rid := call.RequestID
	replies, errs := s.settle.returnOn(ctx, gs, call)
	for i, err := range errs {
		if err != nil {
			s.logErr("cancel failed on a shard", err, "requestId", rid, "shard", gs[i].shard)
			return r, Result{RequestID: rid, Result: Unavailable, Message: "a shard is unavailable; retry the cancel"}, true, nil
		}
		switch replies[i].Code {
		case lua.ReturnReturned:
			r.returned = append(r.returned, gs[i])
			r.envs = append(r.envs, replies[i].Envelopes)
		case lua.ReturnAlreadyReturned: // returned before: nothing to do here
		case lua.ReturnNotFound:
			if s.guard.shardLost(gs[i].shard) { // lostshard.go
				return r, Result{RequestID: rid, Result: Unavailable, Message: lostMessage(gs[i].shard)}, true, nil
			}
			return r, Result{}, true, ErrGrabNotFound
		default: // PENDING: not granted (yet) on this shard
			r.pending = true
		}
	}
	return r, Result{}, false, nil
}

// returnedResult is a cancel's RETURNED answer, with a pool item's amount.
func returnedResult(rid string, back []flow.Item) Result {
	out := Result{RequestID: rid, Result: Returned}
	for i, it := range back {
		out.Items = append(out.Items, ItemResult{PromoID: it.PromoID, Type: it.Type, Num: it.Num})
		if len(it.Parts) > 0 {
			out.Items[i].Amount = &back[i].Amount
		}
	}
	return out
}

// indexItems are the items an index entry names, as a request's.
func indexItems(idx flow.RequestIndex) []Item {
	items := make([]Item, len(idx.Items))
	for i, it := range idx.Items {
		items[i] = Item{PromoID: it.PromoID, Type: it.Type, Num: it.Num, buckets: it.Buckets, bucket: it.Bucket, noIP: it.NoIP}
	}
	return items
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
