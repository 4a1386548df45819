package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
)

// Keys lists the Redis hash keys of the promotions the record holds, by what
// grab-service asks: what a shard may hold (its fence), and whose pending takes
// or end its reconciler visits.
type Keys struct {
	db *sqlx.DB
}

// PromotionKeys returns the Redis hash key of every promotion a shard may hold,
// every bucket of a bucketed one (internal/bucket's layout): not deleted, a create
// still pending included. grab-service's fence asks it whether a shard that lost
// its "built" marker had anything to lose, and a bucket is a promotion hash to lose.
func (k *Keys) PromotionKeys(ctx context.Context) ([]string, error) {
	return k.promotionKeys(ctx, true, `SELECT promo_id, promo_type, buckets FROM promotion WHERE state <> ?`, string(promo.Deleted))
}

// PromotionKeysEndingAfter is PromotionKeys of the promotions whose sale ends after
// t: grab-service's reconciler visits their pending sets every second, and leaves
// those of promotions ended long before to its rarer sweep, so the list does not
// grow with every promotion ever run. Every bucket holds pending takes of its own,
// so every bucket key is listed.
func (k *Keys) PromotionKeysEndingAfter(ctx context.Context, t time.Time) ([]string, error) {
	return k.promotionKeys(ctx, true, `SELECT promo_id, promo_type, buckets FROM promotion WHERE state <> ? AND end_at > ?`,
		string(promo.Deleted), t.UTC())
}

// PromotionKeysEndedBetween is the promotion keys of the ACTIVE promotions whose
// sale ended in (from, to]: grab-service's reconciler announces their ENDED. Only
// bucket 0, the promotion key, announces a bucketed promotion's end, so the other
// buckets are not listed.
func (k *Keys) PromotionKeysEndedBetween(ctx context.Context, from, to time.Time) ([]string, error) {
	return k.promotionKeys(ctx, false, `SELECT promo_id, promo_type, buckets FROM promotion WHERE state = ? AND end_at > ? AND end_at <= ?`,
		string(promo.Active), from.UTC(), to.UTC())
}

// promotionKeys lists the keys of query's promotions, with every bucket key when
// buckets is set.
func (k *Keys) promotionKeys(ctx context.Context, buckets bool, query string, args ...any) ([]string, error) {
	var rows []struct {
		PromoID string `db:"promo_id"`
		Type    int    `db:"promo_type"`
		Buckets int    `db:"buckets"`
	}
	if err := k.db.SelectContext(ctx, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("store: promotion keys: %w", err)
	}
	keys := make([]string, 0, len(rows))
	for _, r := range rows {
		key := promo.Key(r.PromoID, r.Type)
		if k := promo.BucketsOf(r.Buckets); buckets && k > 1 {
			keys = append(keys, BucketKeys(key, k)...)
			continue
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// BucketKeys is the hash key of every bucket of a promotion of k buckets on the
// contract's ring (bucket.Keys), the promotion key alone for k = 1; a k the layout
// does not know (outside 1..16) gives the promotion key alone, so a row the
// record should never hold still names the hash that certainly exists.
func BucketKeys(key string, k int) []string {
	if keys := bucket.Keys(ring.Default, key, k); keys != nil {
		return keys
	}
	return []string{key}
}
