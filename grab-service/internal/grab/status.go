package grab

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

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
// reaches the shard.
type statusCache struct {
	m     sync.Map // key -> cachedStatus
	group singleflight.Group
}

type cachedStatus struct {
	st    Status
	found bool
	until time.Time
}

// ErrPromotionNotFound answers a status request for a promotion that does not exist.
var ErrPromotionNotFound = httpx.NotFound("promotion not found")

// Status answers from the cache, or reads the promotion hash once.
func (s *Service) Status(ctx context.Context, promoID string, typ int) (Status, error) {
	key := promo.Key(promoID, typ)
	now := s.Clock()
	if v, ok := s.status.m.Load(key); ok && now.Before(v.(cachedStatus).until) {
		return v.(cachedStatus).result()
	}
	v, err, _ := s.status.group.Do(key, func() (any, error) {
		h, found, err := lua.ReadHash(ctx, s.Shards[s.ring.Shard(key)], key)
		if err != nil {
			return nil, err
		}
		c := cachedStatus{found: found, until: s.Clock().Add(s.cfg.StatusTTL)}
		if found {
			start, end := time.UnixMilli(h.StartMs).UTC(), time.UnixMilli(h.EndMs).UTC()
			c.st = Status{PromoID: promoID, Type: typ, Remaining: h.Remaining, StartAt: start, EndAt: end,
				State: promo.DeriveState(promo.State(h.State), start, end, h.Remaining, now)}
		}
		s.status.m.Store(key, c)
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
