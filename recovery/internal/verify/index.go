package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
)

// IndexRecord is what the request index check reads from the record (store.Rebuild).
type IndexRecord interface {
	EachIndexEntry(ctx context.Context, shard int, since time.Time, fn func(store.IndexEntry) error) error
}

// indexMargin keeps entries near the end of their life out of the check: Redis
// counts an entry's life from its claim, the record from the GRAB's occurredAt.
const indexMargin = time.Hour

// indexBatch is how many EXISTS go in one pipeline.
const indexBatch = 500

// checkIndex reports, for one shard, the request index entries the record says it
// holds (every GRAB of the last RequestIndexTTL whose entry lives there, written
// since migration 0003) and that it does not. An entry is written at the claim,
// before any take, and never removed from a granted request, so a missing one is
// drift (a shard lost and not rebuilt), not a race with a live sale.
func checkIndex(ctx context.Context, c redis.UniversalClient, rec IndexRecord, shard int, now time.Time) (*Drift, error) {
	d := Drift{Key: "request index", Shard: shard, What: "request index"}
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, rid := range batch {
				p.Exists(ctx, promo.RequestIndexKey(rid))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i, cmd := range cmds {
			if cmd.(*redis.IntCmd).Val() > 0 {
				d.Redis++
			} else if d.Who == "" {
				d.Who = promo.RequestIndexKey(batch[i])
			}
		}
		batch = batch[:0]
		return nil
	}
	err := rec.EachIndexEntry(ctx, shard, now.Add(-flow.RequestIndexTTL+indexMargin), func(e store.IndexEntry) error {
		d.Record++
		if batch = append(batch, e.RequestID); len(batch) >= indexBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, fmt.Errorf("verify: request index of shard %d: %w", shard, err)
	}
	if d.Redis == d.Record {
		return nil, nil
	}
	return &d, nil
}
