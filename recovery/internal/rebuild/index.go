package rebuild

import (
	"context"
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
