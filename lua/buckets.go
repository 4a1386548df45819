package lua

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/ring"
)

// CreateBuckets writes the k bucket hashes of the promotion hash key from spec:
// each bucket holds its share of the total (bucket.Shares) and of the rate limit
// (bucket.RateShare: the window is charged on the pin's home bucket and pins
// spread evenly).
func CreateBuckets(ctx context.Context, shards []redis.UniversalClient, r *ring.Ring, key string, k int, spec AdminSpec) error {
	if k < 1 || k > bucket.Max {
		return fmt.Errorf("create %s: %d buckets, want 1..%d", key, k, bucket.Max)
	}
	shares := bucket.Shares(spec.Total, k)
	rate := bucket.RateShare(spec.RateLimit, k)
	for i, bk := range bucket.Keys(r, key, k) {
		s := spec
		s.Total, s.RateLimit = shares[i], rate
		s.Buckets = k
		code, err := Create(ctx, shards[r.Shard(bk)], r.Shard(bk), bk, s)
		if err != nil {
			return fmt.Errorf("create %s: %w", bk, err)
		}
		if code != AdminOK && code != AdminAlreadyApplied {
			return fmt.Errorf("create %s: %s", bk, code)
		}
	}
	return nil
}

// DeleteBuckets removes the k bucket hashes of key and their companions.
func DeleteBuckets(ctx context.Context, shards []redis.UniversalClient, r *ring.Ring, key string, k int) error {
	for _, bk := range bucket.Keys(r, key, k) {
		if _, err := Delete(ctx, shards[r.Shard(bk)], r.Shard(bk), bk, 0, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("delete %s: %w", bk, err)
		}
	}
	return nil
}

// RemainingOfBuckets is the stock left over all k buckets of key.
func RemainingOfBuckets(ctx context.Context, shards []redis.UniversalClient, r *ring.Ring, key string, k int) (int64, error) {
	var sum int64
	for _, bk := range bucket.Keys(r, key, k) {
		h, ok, err := ReadHash(ctx, shards[r.Shard(bk)], bk)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, fmt.Errorf("remaining of %s: bucket %s is missing", key, bk)
		}
		sum += h.Remaining
	}
	return sum, nil
}
