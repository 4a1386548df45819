package adminservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
)

// changer is the journal as the commands use it (journal.go).
type changer interface {
	propose(ctx context.Context, id store.ID, plan func(p *store.Promotion) (*store.Change, error)) (store.Change, error)
	settle(ctx context.Context, id store.ID, ch store.Change) (store.Promotion, error)
	takeOver(ctx context.Context, id store.ID, pending *store.Change, attempt int) error
}

// liveView is the view of a promotion as the API shows it (view.go).
type liveView interface {
	live(ctx context.Context, p store.Promotion) (promo.Promotion, error)
	answer(ctx context.Context, p store.Promotion) promo.Promotion
}

// createHandler records a new promotion and writes its hash.
type createHandler struct {
	rows    Inserter
	journal changer
	view    liveView
	now     clock
}

func (h createHandler) handle(ctx context.Context, s promo.Spec) (promo.Promotion, error) {
	s.StartAt, s.EndAt = s.StartAt.UTC().Truncate(time.Millisecond), s.EndAt.UTC().Truncate(time.Millisecond)
	if err := validateSpec(s, h.now.now()); err != nil {
		return promo.Promotion{}, err
	}
	id := store.ID{PromoID: s.PromoID, Type: s.Type}
	row, err := h.insert(ctx, id, s)
	if err != nil {
		return promo.Promotion{}, err
	}
	p, err := h.journal.settle(ctx, id, *row.Pending)
	if err != nil {
		return promo.Promotion{}, err
	}
	return h.view.answer(ctx, p), nil
}

// insert records the create as pending (journal step 1), taking over an
// abandoned create of the same key once.
func (h createHandler) insert(ctx context.Context, id store.ID, s promo.Spec) (store.Promotion, error) {
	parts := split(s)
	for attempt := 0; ; attempt++ {
		row := store.NewPromotion(s, promo.Active, h.now.now())
		row.Pending.Actor = actorOf(ctx)
		err := h.rows.InsertPool(ctx, row, parts)
		if err == nil {
			return row, nil
		}
		if !errors.Is(err, store.ErrExists) {
			return store.Promotion{}, mysqlDown(err)
		}
		// The key is taken: by a promotion (even a deleted one, whose flow log must
		// not mix with a new one's), or by a create still pending.
		other, err := h.rows.Row(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if attempt < 2 {
				continue // the other create was just undone
			}
			return store.Promotion{}, fmt.Errorf("%w (other creates of %s keep racing this one)", ErrBusy, id)
		case err != nil:
			return store.Promotion{}, mysqlDown(err)
		case other.Committed() || other.Pending == nil:
			return store.Promotion{}, fmt.Errorf("create %s: %w", id, ErrExists)
		}
		if err := h.journal.takeOver(ctx, id, other.Pending, attempt); err != nil {
			return store.Promotion{}, err
		}
	}
}

// split is an envelope pool's parts in the order they are handed out, drawn once
// per create (docs/CONTRACT.md, "Envelope pools"); nil for a promotion that is no pool.
func split(s promo.Spec) []int64 {
	if s.Envelope == nil {
		return nil
	}
	return promo.SplitEnvelope(s.Envelope.Amount, s.Envelope.MinAmount, int(s.Total), rand.New(defaultSource{}))
}

// defaultSource is math/rand/v2's default source, safe for concurrent use, as a
// rand.Source.
type defaultSource struct{}

func (defaultSource) Uint64() uint64 { return rand.Uint64() }

// patchHandler changes a live promotion.
type patchHandler struct {
	journal changer
	view    liveView
	now     clock
}

func (h patchHandler) handle(ctx context.Context, id store.ID, patch Patch) (promo.Promotion, error) {
	if err := validateID(id); err != nil {
		return promo.Promotion{}, err
	}
	if err := validatePatch(patch); err != nil {
		return promo.Promotion{}, err
	}
	ch, err := h.journal.propose(ctx, id, func(p *store.Promotion) (*store.Change, error) {
		return h.plan(id, p, patch)
	})
	if err != nil {
		return promo.Promotion{}, err
	}
	p, err := h.journal.settle(ctx, id, ch)
	if err != nil {
		return promo.Promotion{}, err
	}
	return h.view.answer(ctx, p), nil
}

// plan is the patch as a change of the row p, or why the row refuses it.
func (h patchHandler) plan(id store.ID, p *store.Promotion, patch Patch) (*store.Change, error) {
	if k := promo.BucketsOf(p.Spec.Buckets); patch.Buckets != nil && *patch.Buckets != k {
		return nil, invalid("buckets", "is fixed at create: the promotion has %d; create another promotion for another count", k)
	}
	if patch.empty() {
		return nil, errPatchEmpty
	}
	if err := envelopeFixed(p.Spec, patch); err != nil {
		return nil, err
	}
	if p.State == promo.Stopped {
		return nil, fmt.Errorf("patch %s: %w", id, ErrStopped)
	}
	if p.Archived { // its flow rows are in the archive: a reopened sale would sell against none
		return nil, fmt.Errorf("patch %s: %w", id, ErrArchived)
	}
	next := patched(p.Spec, patch)
	if patch.EndAt != nil {
		if err := validateEnd(next.StartAt, next.EndAt, h.now.now()); err != nil {
			return nil, err
		}
	}
	return &store.Change{Op: store.OpPatch, Spec: next, State: p.State}, nil
}

// patched is s with the fields the patch names.
func patched(s promo.Spec, patch Patch) promo.Spec {
	if patch.Total != nil {
		s.Total = *patch.Total
	}
	if patch.PerPinLimit != nil {
		s.PerPinLimit = *patch.PerPinLimit
	}
	if patch.PerIPLimit != nil {
		s.PerIPLimit = *patch.PerIPLimit
	}
	if patch.RateLimit != nil {
		rl := *patch.RateLimit
		s.RateLimit = &rl
	}
	if patch.EndAt != nil {
		s.EndAt = patch.EndAt.UTC().Truncate(time.Millisecond)
	}
	if patch.Channels != nil {
		s.Channels = *patch.Channels
	}
	return s
}

// envelopeFixed refuses a patch changing what an envelope pool fixed at create:
// its size (total). The pool's own total changes nothing and is accepted, as the
// promotion's own bucket count is.
func envelopeFixed(s promo.Spec, patch Patch) error {
	if s.Envelope != nil && patch.Total != nil && *patch.Total != s.Total {
		return &EnvelopeFixedError{Field: "total", Have: s.Total, Want: *patch.Total}
	}
	return nil
}

// errNoChange ends a propose that finds nothing to do (a stop of a stopped promotion).
var errNoChange = errors.New("nothing to change")

// stopHandler stops a promotion now.
type stopHandler struct {
	rows    Getter
	journal changer
	view    liveView
	log     *slog.Logger
}

func (h stopHandler) handle(ctx context.Context, id store.ID, reason string) (promo.Promotion, error) {
	if err := validateID(id); err != nil {
		return promo.Promotion{}, err
	}
	if len([]rune(reason)) > MaxReasonLen {
		return promo.Promotion{}, invalid("reason", "must be at most %d characters", MaxReasonLen)
	}
	ch, err := h.journal.propose(ctx, id, func(p *store.Promotion) (*store.Change, error) {
		if p.State == promo.Stopped {
			return nil, errNoChange
		}
		return &store.Change{Op: store.OpStop, Spec: p.Spec, State: promo.Stopped}, nil
	})
	if errors.Is(err, errNoChange) {
		p, err := h.rows.Get(ctx, id)
		if err != nil {
			return promo.Promotion{}, mysqlDown(err)
		}
		return h.view.answer(ctx, p), nil
	}
	if err != nil {
		return promo.Promotion{}, err
	}
	p, err := h.journal.settle(ctx, id, ch)
	if err != nil {
		return promo.Promotion{}, err
	}
	h.log.InfoContext(ctx, "promotion stopped", "promotion", id.String(), "reason", reason, "version", p.Version)
	return h.view.answer(ctx, p), nil
}

// deleteHandler takes a promotion's hash off Redis and leaves its row DELETED.
type deleteHandler struct {
	journal changer
}

func (h deleteHandler) handle(ctx context.Context, id store.ID) error {
	if err := validateID(id); err != nil {
		return err
	}
	ch, err := h.journal.propose(ctx, id, func(p *store.Promotion) (*store.Change, error) {
		return &store.Change{Op: store.OpDelete, Spec: p.Spec, State: promo.Deleted}, nil
	})
	if err != nil {
		return err
	}
	_, err = h.journal.settle(ctx, id, ch)
	return err
}
