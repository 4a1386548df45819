package store

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// DeadLetter is a flow message the sink could not store, as the record keeps it:
// one per promotion the message names (ID zero when it names none it can tell).
type DeadLetter struct {
	Source    string // topic/partition@offset
	RequestID string // the message's key
	Kind      string // GRAB, CANCEL, ... or "" when unreadable
	ID        ID
	Cause     string
}

// maxCause bounds the cause kept, as its column does.
const maxCause = 512

// RecordDeadLetters keeps the sink's dead letters; one kept already is left as it is.
func (f *Flows) RecordDeadLetters(ctx context.Context, letters []DeadLetter) error {
	for _, l := range letters {
		cause := l.Cause
		if len(cause) > maxCause {
			cause = cause[:maxCause]
		}
		_, err := f.db.ExecContext(ctx, `INSERT IGNORE INTO flow_dead_letter (source, request_id, kind, promo_id, promo_type, cause)
			VALUES (?, ?, ?, ?, ?, ?)`, clip(l.Source, 128), clip(l.RequestID, 128), clip(l.Kind, 16), clip(l.ID.PromoID, 64), l.ID.Type, cause)
		if err != nil {
			return fmt.Errorf("record dead letter %s: %w", l.Source, err)
		}
	}
	return nil
}

// DeadLettered counts, by promotion, the dead letters whose event the record does
// not hold (not replayed yet); those naming no promotion count under the zero ID.
func (r *Rebuild) DeadLettered(ctx context.Context) (map[ID]int, error) {
	out, err := countsByID[int](ctx, r.db, `SELECT d.promo_id, d.promo_type, COUNT(*) AS n FROM flow_dead_letter d
		WHERE NOT EXISTS (SELECT 1 FROM grab_flow f WHERE f.request_id = d.request_id AND f.kind = d.kind AND f.promo_id = d.promo_id AND f.promo_type = d.promo_type)
		  AND NOT EXISTS (SELECT 1 FROM grab_flow_early e WHERE e.request_id = d.request_id AND e.kind = d.kind AND e.promo_id = d.promo_id AND e.promo_type = d.promo_type)
		GROUP BY d.promo_id, d.promo_type`)
	if err != nil {
		return nil, fmt.Errorf("dead-lettered promotions: %w", err)
	}
	return out, nil
}

// countsByID runs a query answering promo_id, promo_type and a count n per row.
func countsByID[N int | int64](ctx context.Context, db sqlx.QueryerContext, query string, args ...any) (map[ID]N, error) {
	var rows []struct {
		PromoID string `db:"promo_id"`
		Type    int    `db:"promo_type"`
		N       N      `db:"n"`
	}
	if err := sqlx.SelectContext(ctx, db, &rows, query, args...); err != nil {
		return nil, err
	}
	out := make(map[ID]N, len(rows))
	for _, row := range rows {
		out[ID{row.PromoID, row.Type}] = row.N
	}
	return out, nil
}

// clip keeps at most n bytes of s (its column's width).
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
