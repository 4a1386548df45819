package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// MaxTimelineBuckets bounds the buckets of one timeline: a sale longer than that
// many seconds is shown in wider buckets (TimelineStep).
const MaxTimelineBuckets = 600

// Timeline is a promotion's sale as the flow log recorded it: units granted and
// returned per bucket of StepSeconds, oldest first, empty buckets left out.
type Timeline struct {
	StepSeconds int64
	Buckets     []TimelineBucket
	// Granted and Cancelled are the units of every GRAB and CANCEL row.
	Granted, Cancelled int64
	// SoldOutAt is when the units granted and not returned first reached the
	// total asked about; nil when they never did.
	SoldOutAt *time.Time
}

// TimelineBucket is the units granted and returned in [At, At+StepSeconds).
type TimelineBucket struct {
	At        time.Time `json:"at"`
	Granted   int64     `json:"granted"`
	Cancelled int64     `json:"cancelled"`
}

// timelineSteps are the bucket widths a timeline picks from, in seconds.
var timelineSteps = []int64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400}

// TimelineStep is the narrowest bucket width, in seconds, that covers [lo, hi] in
// at most MaxTimelineBuckets buckets aligned on multiples of the width.
func TimelineStep(lo, hi time.Time) int64 {
	first, last := lo.Unix(), hi.Unix()
	fits := func(step int64) bool { return floorDiv(last, step)-floorDiv(first, step) < MaxTimelineBuckets }
	for _, step := range timelineSteps {
		if fits(step) {
			return step
		}
	}
	step := (last-first)/(MaxTimelineBuckets-1) + 1
	for !fits(step) {
		step++
	}
	return step
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// promotionFlows is the promotion's flow rows, live and archived (recovery
// archive moves them a batch at a time): each side read through its
// (promo_id, promo_type) index, so only the promotion's own rows are read.
const promotionFlows = `(SELECT id, occurred_at, kind, num FROM grab_flow WHERE promo_id = ? AND promo_type = ?
 UNION ALL SELECT id, occurred_at, kind, num FROM grab_flow_archive WHERE promo_id = ? AND promo_type = ?)`

// Timeline reads the sale of id from the flow log in at most MaxTimelineBuckets
// buckets; soldOutTotal is the total its sold-out time is measured against.
func (s *Promotions) Timeline(ctx context.Context, id ID, soldOutTotal int64) (Timeline, error) {
	args := []any{id.PromoID, id.Type, id.PromoID, id.Type}
	var span struct {
		Lo *time.Time `db:"lo"`
		Hi *time.Time `db:"hi"`
	}
	if err := s.db.GetContext(ctx, &span, `SELECT MIN(occurred_at) AS lo, MAX(occurred_at) AS hi FROM `+promotionFlows+` f`, args...); err != nil {
		return Timeline{}, fmt.Errorf("store: timeline of %s: %w", id, err)
	}
	if span.Lo == nil {
		return Timeline{StepSeconds: 1, Buckets: []TimelineBucket{}}, nil
	}
	t := Timeline{StepSeconds: TimelineStep(*span.Lo, *span.Hi)}
	var rows []struct {
		B         int64 `db:"b"`
		Granted   int64 `db:"granted"`
		Cancelled int64 `db:"cancelled"`
	}
	// The session's time zone is UTC (utcConfig), so UNIX_TIMESTAMP reads the
	// stored UTC times as they are.
	if err := s.db.SelectContext(ctx, &rows, `SELECT FLOOR(UNIX_TIMESTAMP(occurred_at) / ?) AS b,
 CAST(SUM(IF(kind = 'GRAB', num, 0)) AS SIGNED) AS granted, CAST(SUM(IF(kind = 'CANCEL', num, 0)) AS SIGNED) AS cancelled
 FROM `+promotionFlows+` f GROUP BY b ORDER BY b LIMIT ?`, append([]any{t.StepSeconds}, append(args, MaxTimelineBuckets)...)...); err != nil {
		return Timeline{}, fmt.Errorf("store: timeline of %s: %w", id, err)
	}
	t.Buckets = make([]TimelineBucket, len(rows))
	for i, r := range rows {
		t.Buckets[i] = TimelineBucket{At: time.Unix(r.B*t.StepSeconds, 0).UTC(), Granted: r.Granted, Cancelled: r.Cancelled}
		t.Granted += r.Granted
		t.Cancelled += r.Cancelled
	}
	at, err := s.soldOutAt(ctx, args, soldOutTotal)
	if err != nil {
		return Timeline{}, fmt.Errorf("store: timeline of %s: %w", id, err)
	}
	t.SoldOutAt = at
	return t, nil
}

// soldOutAt is the time of the first row after which the units granted and not
// returned reached total, in the order the rows happened.
func (s *Promotions) soldOutAt(ctx context.Context, args []any, total int64) (*time.Time, error) {
	if total <= 0 {
		return nil, nil
	}
	var at time.Time
	err := s.db.GetContext(ctx, &at, `SELECT occurred_at FROM (
 SELECT occurred_at, SUM(IF(kind = 'GRAB', num, -num)) OVER (ORDER BY occurred_at, id ROWS UNBOUNDED PRECEDING) AS net
 FROM `+promotionFlows+` f) w WHERE net >= ? ORDER BY occurred_at LIMIT 1`, append(args, total)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	at = at.UTC()
	return &at, nil
}
