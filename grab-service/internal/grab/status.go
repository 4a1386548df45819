package grab

import (
	"context"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/flashsale/platform/internal/expiry"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// Status is the public, cacheable state of a promotion.
type Status struct {
	PromoID   string      `json:"promoId"`
	Type      int         `json:"type"`
	State     promo.State `json:"state"`
	Remaining int64       `json:"remaining"`
	StartAt   time.Time   `json:"startAt"`
	EndAt     time.Time   `json:"endAt"`
}

// statusCache keeps each promotion's status for StatusTTL and lets one request per
// key per instance through to Redis, so the detail page's refresh storm barely
// reaches the shard. The route is public, so the map is bounded (cache.go); the
// singleflight group holds only the reads in flight.
type statusCache struct {
	m     *expiry.Map[cachedStatus] // key -> status, for StatusTTL
	group singleflight.Group
}

type cachedStatus struct {
	st    Status
	found bool
}

// ErrPromotionNotFound answers a status request for a promotion that does not exist.
var ErrPromotionNotFound = httpx.NotFound("promotion not found")

// Status answers from the cache, or reads the promotion hash once.
func (s *Service) Status(ctx context.Context, promoID string, typ int) (Status, error) {
	key := promo.Key(promoID, typ)
	now := s.Clock()
	if c, ok := s.status.m.Get(key, now); ok {
		return c.result()
	}
	v, err, _ := s.status.group.Do(key, func() (any, error) {
		h, found, err := lua.ReadHash(ctx, s.Shards[s.ring.Shard(key)], key)
		if err != nil {
			return nil, err
		}
		c := cachedStatus{found: found}
		if found {
			start, end := time.UnixMilli(h.StartMs).UTC(), time.UnixMilli(h.EndMs).UTC()
			c.st = Status{PromoID: promoID, Type: typ, Remaining: h.Remaining, StartAt: start, EndAt: end,
				State: promo.DeriveState(promo.State(h.State), start, end, h.Remaining, now)}
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
