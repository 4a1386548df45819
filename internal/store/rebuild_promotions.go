package store

import (
	"context"
	"fmt"
	"time"

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
	return s.promotionKeys(ctx, `SELECT promo_id, promo_type FROM promotion WHERE state <> ?`, string(promo.Deleted))
}

// PromotionKeysEndingAfter is PromotionKeys of the promotions whose sale ends after
// t: grab-service's reconciler visits their pending sets every second, and leaves
// those of promotions ended long before to its rarer sweep, so the list does not
// grow with every promotion ever run.
func (s *Store) PromotionKeysEndingAfter(ctx context.Context, t time.Time) ([]string, error) {
	return s.promotionKeys(ctx, `SELECT promo_id, promo_type FROM promotion WHERE state <> ? AND end_at > ?`, string(promo.Deleted), t.UTC())
}

// PromotionKeysEndedBetween is PromotionKeys of the ACTIVE promotions whose sale
// ended in (from, to]: grab-service's reconciler announces their ENDED.
func (s *Store) PromotionKeysEndedBetween(ctx context.Context, from, to time.Time) ([]string, error) {
	return s.promotionKeys(ctx, `SELECT promo_id, promo_type FROM promotion WHERE state = ? AND end_at > ? AND end_at <= ?`,
		string(promo.Active), from.UTC(), to.UTC())
}

func (s *Store) promotionKeys(ctx context.Context, query string, args ...any) ([]string, error) {
	var rows []struct {
		PromoID string `db:"promo_id"`
		Type    int    `db:"promo_type"`
	}
	if err := s.db.SelectContext(ctx, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("store: promotion keys: %w", err)
	}
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = promo.Key(r.PromoID, r.Type)
	}
	return keys, nil
}

// PendingChange is an admin change recorded but not yet promoted or discarded.
type PendingChange struct {
	ID ID
	At time.Time // pending_at, by promo-admin's clock
}

// PendingChanges lists every pending admin change, creates included. The rebuild
// waits on those of its shards that the request which made them may still promote.
func (s *Store) PendingChanges(ctx context.Context) ([]PendingChange, error) {
	var rows []struct {
		PromoID string    `db:"promo_id"`
		Type    int       `db:"promo_type"`
		At      time.Time `db:"pending_at"`
	}
	err := s.db.SelectContext(ctx, &rows, `SELECT promo_id, promo_type, pending_at FROM promotion WHERE pending_at IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("store: pending changes: %w", err)
	}
	out := make([]PendingChange, len(rows))
	for i, r := range rows {
		out[i] = PendingChange{ID: ID{r.PromoID, r.Type}, At: r.At}
	}
	return out, nil
}
