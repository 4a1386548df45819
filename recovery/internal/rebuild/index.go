package rebuild

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
)

// restoreIndex writes back the request index entries that lived on the shard
// (flow.RequestIndex under promo.RequestIndexKey), from the record's GRAB rows of
// the last RequestIndexTTL, each with what is left of its life. Without them a retry
// of a granted grab could be answered SOLD_OUT by grab-service's short-circuit (it
// answers only requestIds the index says hold no claim), and a requestId reused for
// another promotion would not be refused. SET NX: an entry a grab has claimed since
// the server came back is that grab's own and stays. It returns the entries written.
func restoreIndex(ctx context.Context, c redis.UniversalClient, rec Record, shard, batch int, now time.Time) (int, error) {
	w := newPipe(ctx, c, batch)
	n := 0
	err := rec.EachIndexEntry(ctx, shard, now.Add(-flow.RequestIndexTTL), func(e store.IndexEntry) error {
		left := flow.RequestIndexTTL - now.Sub(e.At)
		if left < time.Second {
			return nil
		}
		n++
		return w.do("SET", promo.RequestIndexKey(e.RequestID), e.RequestIndex.AppendJSON(nil), "NX", "PX", left.Milliseconds())
	})
	if err == nil {
		err = w.flush()
	}
	if err != nil {
		return n, fmt.Errorf("restore the request index: %w", err)
	}
	return n, nil
}

// restoreHolds puts back on the shard's holds set the holds of the grants whose
// index entries live there and that the record shows neither confirmed nor
// returned, each at its own deadline: the reconciler returns the ones due at its
// next pass, and a confirm still finds the others. ZADD NX: a hold a grab has
// registered since the server came back stays as it is. The holds the record shows
// closed are taken away, should the server be one that lagged (a promoted replica)
// and still hold one: expiry must never return a grant that was confirmed. It
// returns the open holds written.
func restoreHolds(ctx context.Context, c redis.UniversalClient, rec FlowLog, shard, batch int, now time.Time) (int, error) {
	holds, err := rec.Holds(ctx, shard, now.Add(-flow.RequestIndexTTL))
	if err != nil {
		return 0, fmt.Errorf("restore the holds: %w", err)
	}
	w := newPipe(ctx, c, batch)
	open := 0
	for _, h := range holds {
		if h.Open {
			open++
			err = w.do("ZADD", promo.HoldsKey, "NX", h.UntilMs, h.RequestID)
		} else {
			err = errors.Join(w.do("ZREM", promo.HoldsKey, h.RequestID), w.do("ZREM", promo.ConfirmingKey(promo.HoldsKey), h.RequestID))
		}
		if err != nil {
			return 0, fmt.Errorf("restore the holds: %w", err)
		}
	}
	if err := w.flush(); err != nil {
		return 0, fmt.Errorf("restore the holds: %w", err)
	}
	return open, nil
}
