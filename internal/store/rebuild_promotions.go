package store

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
)

// LivePromotions returns every committed promotion that is neither deleted nor
// archived, in key order: what the Redis shards must hold, and what bin/recovery
// rebuilds and verifies. A create still pending (version 0) is left out: its hash
// either landed or is discarded by promo-admin's resolver, which reads the shard to
// decide. An archived promotion's rows are in grab_flow_archive (Archive).
func (s *Rebuild) LivePromotions(ctx context.Context) ([]Promotion, error) {
	var rows []promotionRow
	err := s.db.SelectContext(ctx, &rows, `SELECT `+promotionColumns+` FROM promotion
 WHERE version > 0 AND state <> ? AND archived_at IS NULL ORDER BY promo_id, promo_type`, string(promo.Deleted))
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

// PendingChange is an admin change recorded but not yet promoted or discarded.
type PendingChange struct {
	ID      ID
	Buckets int       // the promotion's buckets (1 for an ordinary one): its change reaches every one
	At      time.Time // pending_at, by promo-admin's clock
}

// PendingChanges lists every pending admin change, creates included. The rebuild
// waits on those of its shards that the request which made them may still promote.
func (s *Rebuild) PendingChanges(ctx context.Context) ([]PendingChange, error) {
	var rows []struct {
		PromoID string    `db:"promo_id"`
		Type    int       `db:"promo_type"`
		Buckets int       `db:"buckets"`
		At      time.Time `db:"pending_at"`
	}
	err := s.db.SelectContext(ctx, &rows, `SELECT promo_id, promo_type, buckets, pending_at FROM promotion WHERE pending_at IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("store: pending changes: %w", err)
	}
	out := make([]PendingChange, len(rows))
	for i, r := range rows {
		out[i] = PendingChange{ID: ID{r.PromoID, r.Type}, Buckets: promo.BucketsOf(r.Buckets), At: r.At}
	}
	return out, nil
}

// EnvelopePool is an envelope pool as the record holds it: its split, and which
// of its parts the flow log says are handed out.
type EnvelopePool struct {
	EnvelopeSplit
	// Held counts, per part, the GRAB rows naming it less those of them given
	// back: a CANCEL row of a request gives back the parts its GRAB row took (with
	// parts of its own or without: a CANCEL published after its ledger entry was
	// gone names none). 1 for a part handed out, 0 for one left; anything else the
	// record is at odds with itself, which Odd lists for the caller to report.
	Held []int
	// Unknown counts the parts GRAB rows name that the split lacks (less those
	// given back).
	Unknown int
}

// NewEnvelopePool is split with nothing handed out yet: the caller counts the
// GRAB rows in with Hold and the GRAB rows of the requests that have a CANCEL
// out with GiveBack.
func NewEnvelopePool(split EnvelopeSplit) EnvelopePool {
	return EnvelopePool{EnvelopeSplit: split, Held: make([]int, len(split.Parts))}
}

// Hold counts the parts a GRAB row took as handed out.
func (p *EnvelopePool) Hold(parts []int) { p.count(parts, 1) }

// GiveBack counts the parts a GRAB row took as back in the pool: its request has
// a CANCEL row.
func (p *EnvelopePool) GiveBack(parts []int) { p.count(parts, -1) }

func (p *EnvelopePool) count(parts []int, by int) {
	for _, i := range parts {
		if i >= len(p.Held) {
			p.Unknown += by
			continue
		}
		p.Held[i] += by
	}
}

// Left is the idx of the parts not handed out, in the order they are handed out.
// A part given back more often than taken (Odd reports it) is left: its
// requests' ledger entries all say returned.
func (p EnvelopePool) Left() []int {
	var out []int
	for i, h := range p.Held {
		if h <= 0 {
			out = append(out, i)
		}
	}
	return out
}

// LeftAmount is the sum of the parts not handed out.
func (p EnvelopePool) LeftAmount() int64 {
	var sum int64
	for _, i := range p.Left() {
		sum += p.Parts[i]
	}
	return sum
}

// Odd describes what in the record does not add up: a part held by more than one
// grab, or given back more often than taken, idx outside the split, a split that
// does not sum to the budget.
func (p EnvelopePool) Odd() []string {
	var out []string
	var sum int64
	for i, h := range p.Held {
		sum += p.Parts[i]
		switch {
		case h > 1:
			out = append(out, fmt.Sprintf("part %d is held by %d grabs", i, h))
		case h < 0:
			out = append(out, fmt.Sprintf("part %d is given back %d times more than taken", i, -h))
		}
	}
	if p.Unknown != 0 {
		out = append(out, fmt.Sprintf("%d parts named by GRAB rows are not in the split of %d", p.Unknown, len(p.Parts)))
	}
	if sum != p.Amount {
		out = append(out, fmt.Sprintf("the split sums to %d, the budget is %d", sum, p.Amount))
	}
	return out
}

// EnvelopePool reads the pool of a promotion, for verify; ok is false when the
// promotion is no pool (envelope_amount NULL) or not in the record. One scan of
// the pool's GRAB rows that name parts, each with whether its request's CANCEL is
// there. (The rebuild counts the same from the pass over the flow log that builds
// its ledger, so the two cannot disagree.)
func (s *Rebuild) EnvelopePool(ctx context.Context, id ID) (pool EnvelopePool, ok bool, err error) {
	split, ok, err := s.EnvelopeSplit(ctx, id)
	if err != nil || !ok {
		return pool, ok, err
	}
	pool = NewEnvelopePool(split)
	rows, err := s.db.QueryContext(ctx, `SELECT g.parts, c.id IS NOT NULL FROM grab_flow g
 LEFT JOIN grab_flow c ON c.request_id = g.request_id AND c.kind = 'CANCEL' AND c.promo_id = g.promo_id AND c.promo_type = g.promo_type
 WHERE g.promo_id = ? AND g.promo_type = ? AND g.kind = 'GRAB' AND g.parts IS NOT NULL`, id.PromoID, id.Type)
	if err != nil {
		return pool, false, fmt.Errorf("store: envelope pool of %s: flow log: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var text string
		var cancelled bool
		if err := rows.Scan(&text, &cancelled); err != nil {
			return pool, false, fmt.Errorf("store: envelope pool of %s: flow log: %w", id, err)
		}
		if cancelled {
			continue // taken and given back: the part counts neither way
		}
		parts, err := flow.ParseParts(text)
		if err != nil {
			return pool, false, fmt.Errorf("store: envelope pool of %s: %w", id, err)
		}
		pool.Hold(parts)
	}
	if err := rows.Err(); err != nil {
		return pool, false, fmt.Errorf("store: envelope pool of %s: flow log: %w", id, err)
	}
	return pool, true, nil
}
