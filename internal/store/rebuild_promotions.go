package store

import (
	"context"
	"fmt"

	"github.com/flashsale/platform/internal/promo"
)

// LivePromotions returns every committed promotion that is not deleted, in key
// order: what the Redis shards must hold, and what bin/recovery rebuilds and
// verifies. A create still pending (version 0) is left out: its hash either landed
// or is discarded by promo-admin's resolver, which reads the shard to decide.
func (s *Store) LivePromotions(ctx context.Context) ([]Promotion, error) {
	var rows []promotionRow
	err := s.db.SelectContext(ctx, &rows, `SELECT `+promotionColumns+` FROM promotion
 WHERE version > 0 AND state <> ? ORDER BY promo_id, promo_type`, string(promo.Deleted))
	if err != nil {
		return nil, fmt.Errorf("store: live promotions: %w", err)
	}
	out := make([]Promotion, 0, len(rows))
	for _, r := range rows {
		p, err := r.promotion()
		if err != nil {
			return nil, fmt.Errorf("store: live promotions: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// PromotionKeys returns the Redis hash key of every promotion a shard may hold:
// not deleted, a create still pending included. grab-service's fence asks it
// whether a shard that lost its "built" marker had anything to lose.
func (s *Store) PromotionKeys(ctx context.Context) ([]string, error) {
	var rows []struct {
		PromoID string `db:"promo_id"`
		Type    int    `db:"promo_type"`
	}
	if err := s.db.SelectContext(ctx, &rows, `SELECT promo_id, promo_type FROM promotion WHERE state <> ?`, string(promo.Deleted)); err != nil {
		return nil, fmt.Errorf("store: promotion keys: %w", err)
	}
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = promo.Key(r.PromoID, r.Type)
	}
	return keys, nil
}
