package adminservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
)

// proposer records creates and patches as proposals: validated and planned as
// the commands validate and plan them (same refusals), written to the queue only.
type proposer struct {
	queue  Queue
	rows   Inserter // Row: the key's row as stored, a pending create included
	plans  patchHandler
	read   getHandler // the promotion a patch leaves unchanged, as GET answers it
	now    clock
	bounds store.Bounds
}

// patchChange is a PATCH proposal's change as recorded and shown: the fields the
// patch names.
type patchChange struct {
	Total       *int64           `json:"total,omitempty"`
	PerPinLimit *int64           `json:"perPinLimit,omitempty"`
	PerIPLimit  *int64           `json:"perIpLimit,omitempty"`
	RateLimit   *promo.RateLimit `json:"rateLimit,omitempty"`
	EndAt       *time.Time       `json:"endAt,omitempty"`
	Channels    *promo.Channels  `json:"channels,omitempty"`
}

func changeOf(p Patch) patchChange {
	c := patchChange{Total: p.Total, PerPinLimit: p.PerPinLimit, PerIPLimit: p.PerIPLimit, RateLimit: p.RateLimit, Channels: p.Channels}
	if p.EndAt != nil {
		end := p.EndAt.UTC().Truncate(time.Millisecond)
		c.EndAt = &end
	}
	return c
}

func (c patchChange) patch() Patch {
	return Patch{Total: c.Total, PerPinLimit: c.PerPinLimit, PerIPLimit: c.PerIPLimit, RateLimit: c.RateLimit, EndAt: c.EndAt, Channels: c.Channels}
}

func (h proposer) create(ctx context.Context, s promo.Spec) (Proposal, error) {
	s.StartAt, s.EndAt = s.StartAt.UTC().Truncate(time.Millisecond), s.EndAt.UTC().Truncate(time.Millisecond)
	if err := validateSpec(s, h.now.now()); err != nil {
		return Proposal{}, err
	}
	id := store.ID{PromoID: s.PromoID, Type: s.Type}
	row, err := h.rows.Row(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return Proposal{}, mysqlDown(err)
	case row.Committed():
		return Proposal{}, fmt.Errorf("propose create %s: %w", id, ErrExists)
	default:
		return Proposal{}, fmt.Errorf("%w (a create of %s is in progress)", ErrBusy, id)
	}
	body, err := json.Marshal(s)
	if err != nil {
		return Proposal{}, fmt.Errorf("propose create %s: %w", id, err)
	}
	return h.record(ctx, id, store.ProposeCreate, 0, body)
}

// patch plans p against the committed row as patchHandler does. A patch that
// leaves every guarded field as it is (a console re-sending the values it shows)
// is no proposal and writes nothing: a write would move the version, making every
// pending proposal of the promotion stale, and one planned again against a row an
// approval just changed would put the old values back unapproved.
func (h proposer) patch(ctx context.Context, id store.ID, p Patch) (PatchOutcome, error) {
	if err := validateID(id); err != nil {
		return PatchOutcome{}, err
	}
	if err := validatePatch(p); err != nil {
		return PatchOutcome{}, err
	}
	row, err := h.rows.Row(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return PatchOutcome{}, fmt.Errorf("%s: %w", id, ErrNotFound)
	case err != nil:
		return PatchOutcome{}, mysqlDown(err)
	case !row.Committed() || row.State == promo.Deleted:
		return PatchOutcome{}, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	ch, err := h.plans.plan(id, &row, p)
	if err != nil {
		return PatchOutcome{}, err
	}
	if sameGuarded(row.Spec, ch.Spec) {
		pr, err := h.read.handle(ctx, id)
		if err != nil {
			return PatchOutcome{}, err
		}
		return PatchOutcome{Unchanged: &pr}, nil
	}
	body, err := json.Marshal(changeOf(p))
	if err != nil {
		return PatchOutcome{}, fmt.Errorf("propose patch %s: %w", id, err)
	}
	out, err := h.record(ctx, id, store.ProposePatch, row.Version, body)
	if err != nil {
		return PatchOutcome{}, err
	}
	return PatchOutcome{Proposal: &out}, nil
}

// sameGuarded tells whether b changes nothing approval guards of a: total,
// limits, window, channels, which are every field a patch can change (buckets
// only as it is); TestEveryPatchFieldIsGuarded holds a new one to that choice.
func sameGuarded(a, b promo.Spec) bool {
	return a.Total == b.Total && a.PerPinLimit == b.PerPinLimit && a.PerIPLimit == b.PerIPLimit &&
		sameRate(a.RateLimit, b.RateLimit) && a.EndAt.Equal(b.EndAt) && a.Channels == b.Channels
}

func sameRate(a, b *promo.RateLimit) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// record writes the proposal under the request's actor, within the queue's bounds.
func (h proposer) record(ctx context.Context, id store.ID, kind string, base int64, body []byte) (Proposal, error) {
	p := store.Proposal{PromoID: id.PromoID, Type: id.Type, Kind: kind, BaseVersion: base, Body: string(body),
		Proposer: actorOf(ctx), ProposedAt: h.now.now(), Status: store.ProposalPending}
	n, err := h.queue.Propose(ctx, p, h.bounds)
	if err != nil {
		return Proposal{}, queueError(err)
	}
	p.ID = n
	return proposalView(p), nil
}
