package adminservice

import (
	"context"
	"errors"
	"fmt"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
)

// getHandler reads a promotion with its live counters.
type getHandler struct {
	rows Getter
	view liveView
}

func (h getHandler) handle(ctx context.Context, id store.ID) (promo.Promotion, error) {
	if err := validateID(id); err != nil {
		return promo.Promotion{}, err
	}
	p, err := h.rows.Get(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return promo.Promotion{}, fmt.Errorf("get %s: %w", id, ErrNotFound)
	case err != nil:
		return promo.Promotion{}, mysqlDown(err)
	case p.State == promo.Deleted:
		return promo.Promotion{}, fmt.Errorf("get %s: %w", id, ErrNotFound)
	}
	return h.view.live(ctx, p)
}

// historyHandler reads a promotion's audit trail.
type historyHandler struct {
	rows Auditor
}

func (h historyHandler) handle(ctx context.Context, id store.ID) (History, error) {
	if err := validateID(id); err != nil {
		return History{}, err
	}
	entries, err := h.rows.History(ctx, id, store.MaxHistory)
	if err != nil {
		return History{}, mysqlDown(err)
	}
	if len(entries) == 0 {
		if _, err := h.rows.Row(ctx, id); errors.Is(err, store.ErrNotFound) {
			return History{}, fmt.Errorf("history of %s: %w", id, ErrNotFound)
		} else if err != nil {
			return History{}, mysqlDown(err)
		}
	}
	return History{Entries: entries}, nil
}

// listHandler pages through the record with the record's counters.
type listHandler struct {
	rows Lister
	now  clock
}

func (h listHandler) handle(ctx context.Context, q ListQuery) (ListPage, error) {
	if err := validateList(q); err != nil {
		return ListPage{}, err
	}
	now := h.now.now()
	page, err := h.rows.List(ctx, store.ListQuery{State: promo.State(q.State), Now: now, Limit: q.Limit, Cursor: q.Cursor})
	if err != nil {
		if errors.Is(err, store.ErrBadCursor) {
			return ListPage{}, invalid("cursor", "is not a cursor this service gave out")
		}
		return ListPage{}, mysqlDown(err)
	}
	out := ListPage{Items: make([]promo.Promotion, len(page.Items)), NextCursor: page.NextCursor}
	for i, p := range page.Items {
		out.Items[i] = recorded(p, now)
	}
	return out, nil
}
