package grab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/flashsale/platform/internal/expiry"
	"github.com/flashsale/platform/internal/fanout"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// Status is the public, cacheable state of a promotion.
type Status struct {
	PromoID   string      `json:"promoId"`
	Type      int         `json:"type"`
	State     promo.State `json:"state"`
	Remaining int64       `json:"remaining"`
	// RemainingAmount is, for an envelope pool, the sum of the parts left.
	RemainingAmount *int64    `json:"remainingAmount,omitempty"`
	StartAt         time.Time `json:"startAt"`
	EndAt           time.Time `json:"endAt"`
	// Channels are the channels the promotion is sold on (the hash's field):
	// left out for a promotion sold on every channel.
	Channels promo.Channels `json:"channels,omitempty"`
}

// statusCache keeps each promotion's status for StatusTTL and lets one request per
// key per instance through to Redis, so the detail page's refresh storm barely
// reaches the shard. The route is public, so the map is bounded (cache.go), the
// singleflight group holds only the reads in flight, and the reads themselves
// are limited.
type statusCache struct {
	m     *expiry.Map[cachedStatus] // key -> status, for StatusTTL
	group singleflight.Group
	limit *rate.Limiter // nil: no limit
}

// StatusStale is how long past its StatusTTL a status answer may stand in for a
// fresh one the status rate limit refuses to read: a detail page then shows a
// second-old figure rather than an error while the limit holds off a flood.
const StatusStale = time.Second

// DefaultStatusRate is the shard reads a second one instance makes for status
// answers it does not hold. A promotion the detail pages poll costs at most one
// read per StatusTTL (2 a second at 500 ms), so this serves 2,500 promotions
// polled at once, above a sale's live ones; it is a few hundred reads a second on
// each shard, and at most 2,500 cache entries within a StatusTTL, well inside
// DefaultStatusCacheSize. A flood of distinct ids past it is answered 429.
const DefaultStatusRate = 5000

// newStatusLimit is a token bucket of perSecond (nil for 0 or less) holding a
// tenth of a second's worth, as the method limits do. It runs on the service's
// clock, as the cache does.
func newStatusLimit(perSecond float64) *rate.Limiter {
	if perSecond <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond/10)))
}

type cachedStatus struct {
	st    Status
	found bool
}

// Status answers from the cache, or reads the promotion hash once.
func (s *Grabber) Status(ctx context.Context, promoID string, typ int) (Status, error) {
	key := promo.Key(promoID, typ)
	now := s.Clock()
	if c, ok := s.status.m.Get(key, now); ok {
		return c.result()
	}
	// The read is shared by every caller waiting on the key, so it runs on a
	// context of its own, bounded on its own: no one caller's cancellation is the
	// others' (go-redis, without ContextTimeoutEnabled, ignores deadlines today).
	v, err, _ := s.status.group.Do(key, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*s.cfg.RedisTimeout)
		defer cancel()
		// The limit is on reads of the shard, not on requests: an answer from the
		// cache costs neither the shard nor memory, and the detail pages' refresh
		// storm on a live promotion is the cache's to absorb, so it must not be
		// refused for it. Only a miss takes a token, one per key at a time (the
		// waiters share it): what is limited is the flood of distinct ids, each a
		// read and an entry, to StatusRate reads and entries a second.
		if s.status.limit != nil && !s.status.limit.AllowN(now, 1) {
			// A live promotion whose entry lapsed a moment ago is not refused for a
			// flood of other ids: its last answer stands in, StatusStale at most
			// past its time.
			if c, ok := s.status.m.GetStale(key, now); ok {
				return c, nil
			}
			return nil, ErrStatusRateLimited
		}
		h, found, err := lua.ReadHash(ctx, s.Shards[s.ring.Shard(key)], key)
		if err != nil {
			return nil, err
		}
		if found && h.Buckets > 1 {
			if h.Remaining, err = s.bucketsRemaining(ctx, key, int(h.Buckets), h.PerIP > 0, h.Remaining); err != nil {
				return nil, err
			}
		}
		c := cachedStatus{found: found}
		if found {
			start, end := time.UnixMilli(h.StartMs).UTC(), time.UnixMilli(h.EndMs).UTC()
			c.st = Status{PromoID: promoID, Type: typ, Remaining: h.Remaining, StartAt: start, EndAt: end,
				State: promo.DeriveState(promo.State(h.State), start, end, h.Remaining, now), Channels: h.Channels}
			if h.IsPool() { // one bucket only: the hash holds the whole pool
				c.st.RemainingAmount = &h.EnvLeft
			}
		}
		s.status.m.Put(key, c, s.Clock())
		return c, nil
	})
	if err != nil {
		return Status{}, err
	}
	return v.(cachedStatus).result()
}

func (c cachedStatus) result() (Status, error) {
	if !c.found {
		return Status{}, ErrPromotionNotFound
	}
	return c.st, nil
}

// bucketsRemaining is the stock left over the k buckets of promotion key, read in
// parallel: the status of a promotion in buckets is its whole, SOLD_OUT only when
// every bucket is. first is bucket 0's, read by the caller. The layout, and
// whether the promotion has an ip limit, are kept for the grabs (buckets.go).
func (s *Grabber) bucketsRemaining(ctx context.Context, key string, k int, ipLimit bool, first int64) (int64, error) {
	l := s.route.learn(key, k, ipLimit, s.Clock()) // read from bucket 0 itself: the grabs need not learn it
	rem := make([]int64, k)
	errs := make([]error, k)
	rem[0] = first // bucket 0, the promotion key, read already
	fanout.Each(l.Keys[1:], func(i int, bk string) {
		b := i + 1
		h, found, err := lua.ReadHash(ctx, s.Shards[l.Shards[b]], bk)
		if err == nil && !found {
			err = fmt.Errorf("bucket %d of %s (%s on shard %d) is missing", b, key, bk, l.Shards[b])
		}
		rem[b], errs[b] = h.Remaining, err
	})
	var sum int64
	for _, r := range rem {
		sum += r
	}
	return sum, errors.Join(errs...)
}
