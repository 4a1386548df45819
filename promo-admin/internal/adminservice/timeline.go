package adminservice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/platform/internal/store"
)

// Timeliner reads a promotion's sale from the flow log (store.Promotions.Timeline).
type Timeliner interface {
	Timeline(ctx context.Context, id store.ID, soldOutTotal int64) (store.Timeline, error)
}

// Timeline is a promotion's sale as the record kept it, for the console's chart
// after a reload and after the sale: units granted and returned per bucket of
// StepSeconds (empty buckets left out, at most store.MaxTimelineBuckets), and
// when the units granted and not returned first reached total.
type Timeline struct {
	PromoID     string                 `json:"promoId"`
	Type        int                    `json:"type"`
	Total       int64                  `json:"total"`
	StartAt     time.Time              `json:"startAt"`
	EndAt       time.Time              `json:"endAt"`
	StepSeconds int64                  `json:"stepSeconds"`
	Granted     int64                  `json:"granted"`
	Cancelled   int64                  `json:"cancelled"`
	SoldOutAt   *time.Time             `json:"soldOutAt,omitempty"`
	Buckets     []store.TimelineBucket `json:"buckets"`
}

// timelineHandler reads a committed promotion's timeline; a deleted promotion
// keeps its sale.
type timelineHandler struct {
	rows interface {
		Getter
		Timeliner
	}
}

func (h timelineHandler) handle(ctx context.Context, id store.ID) (Timeline, error) {
	if err := validateID(id); err != nil {
		return Timeline{}, err
	}
	p, err := h.rows.Get(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Timeline{}, fmt.Errorf("timeline of %s: %w", id, ErrNotFound)
	case err != nil:
		return Timeline{}, mysqlDown(err)
	}
	tl, err := h.rows.Timeline(ctx, id, p.Spec.Total)
	if err != nil {
		return Timeline{}, mysqlDown(err)
	}
	return Timeline{PromoID: id.PromoID, Type: id.Type, Total: p.Spec.Total, StartAt: p.Spec.StartAt, EndAt: p.Spec.EndAt,
		StepSeconds: tl.StepSeconds, Granted: tl.Granted, Cancelled: tl.Cancelled, SoldOutAt: tl.SoldOutAt, Buckets: tl.Buckets}, nil
}
