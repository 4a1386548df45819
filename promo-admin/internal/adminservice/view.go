package adminservice

import (
	"context"
	"log/slog"
	"time"

	"github.com/flashsale/platform/internal/bucket"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
)

// counters are what a view shows of a promotion's sale so far: its units left and
// granted and, of an envelope pool, the amount of its envelopes left.
type counters struct {
	remaining, granted, remainingAmount int64
}

// view is a committed row as the API shows it, with the given counters. A
// promotion in buckets shows its count and where they live; an ordinary one shows
// neither, as before buckets existed. An envelope pool shows its budget, least
// envelope and amount left.
func view(p store.Promotion, c counters, now time.Time) promo.Promotion {
	remaining, granted := c.remaining, c.granted
	key := p.ID().Key()
	v := promo.Promotion{
		Spec:      p.Spec,
		Key:       key,
		Shard:     ring.Default.Shard(key),
		State:     promo.DeriveState(p.State, p.Spec.StartAt, p.Spec.EndAt, remaining, now),
		Remaining: remaining,
		Granted:   granted,
		CreatedAt: p.CreatedAt,
		UpdatedAt: p.UpdatedAt,
	}
	if k := promo.BucketsOf(p.Spec.Buckets); k > 1 {
		v.BucketShards = layoutOf(p.ID(), k).Shards
	} else {
		v.Buckets = 0
	}
	if e := p.Spec.Envelope; e != nil {
		left := c.remainingAmount
		v.Envelope = &promo.Envelope{Amount: e.Amount, MinAmount: e.MinAmount, RemainingAmount: &left}
	}
	return v
}

// recorded is the view with the record's counters (kept by the flow sink; a
// pool's amount left is List's sum of its flow rows, store.Promotion.RemainingAmount).
func recorded(p store.Promotion, now time.Time) promo.Promotion {
	return view(p, counters{p.Remaining, p.Spec.Total - p.Remaining, p.RemainingAmount}, now)
}

// viewer reads a promotion's live state: the counters of its hash, or of its
// buckets' hashes.
type viewer struct {
	rows    Getter
	shards  Shards
	buckets bucketReader
	timeout time.Duration // of each Redis call
	now     clock
	log     *slog.Logger
}

// bucketReader reads the hash of one bucket (buckets.go).
type bucketReader interface {
	readBucket(ctx context.Context, l bucket.Layout, b int) (lua.HashState, error)
}

// live is the view with the counters read from the promotion's hash, or summed
// over its buckets' hashes.
func (vw *viewer) live(ctx context.Context, p store.Promotion) (promo.Promotion, error) {
	if k := promo.BucketsOf(p.Spec.Buckets); k > 1 {
		return vw.liveBuckets(ctx, p, k)
	}
	key := p.ID().Key()
	shard, c := vw.shards.For(key)
	ctx, cancel := context.WithTimeout(ctx, vw.timeout)
	defer cancel()
	h, exists, err := lua.ReadHash(ctx, c, key)
	if err != nil {
		return promo.Promotion{}, &UnavailableError{Dependency: shardName(shard), Msg: "could not read the live counters", Err: err}
	}
	if !exists {
		return promo.Promotion{}, &UnavailableError{Dependency: shardName(shard),
			Msg: "the shard has no hash for this promotion although the record has it; rebuild the shard with bin/recovery"}
	}
	return view(p, counters{h.Remaining, h.Granted(), h.EnvLeft}, vw.now.now()), nil
}

// liveBuckets is live for a promotion in k buckets: remaining and granted are
// the sums, bucketRemaining each bucket's.
func (vw *viewer) liveBuckets(ctx context.Context, p store.Promotion, k int) (promo.Promotion, error) {
	l := layoutOf(p.ID(), k)
	var remaining, granted int64
	by := make([]int64, k)
	for b := range l.Keys {
		h, err := vw.buckets.readBucket(ctx, l, b)
		if err != nil {
			return promo.Promotion{}, err
		}
		by[b] = h.Remaining
		remaining += h.Remaining
		granted += h.Granted()
	}
	v := view(p, counters{remaining: remaining, granted: granted}, vw.now.now()) // a pool is of one bucket
	v.BucketRemaining = by
	return v, nil
}

// answer is the view a successful change returns: live when the shard answers,
// else the record's (the change is done either way).
func (vw *viewer) answer(ctx context.Context, p store.Promotion) promo.Promotion {
	v, err := vw.live(ctx, p)
	if err != nil {
		vw.log.WarnContext(ctx, "answering with the record's counters", "promotion", p.ID().String(), "err", err)
		if p.Spec.Envelope != nil {
			// A row a change returned lacks the pool's amount left by the record; Get has it.
			if read, err := vw.rows.Get(ctx, p.ID()); err == nil {
				p.RemainingAmount = read.RemainingAmount
			}
		}
		return recorded(p, vw.now.now())
	}
	return v
}
