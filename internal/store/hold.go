package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// holdWrite is one grab_hold change (migration 0008): a GRAB's hold, or a CONFIRM.
type holdWrite struct {
	requestID   string
	indexShard  int
	untilMs     int64     // the GRAB's holdUntil
	confirmedAt time.Time // the CONFIRM's occurredAt
	confirm     bool
}

// writeHold records a hold or its confirm. Both are upserts that commute, so a
// redelivered event changes nothing and the order of a GRAB and its CONFIRM does not
// matter: the first confirm's time stands.
func writeHold(ctx context.Context, tx sqlx.ExecerContext, h holdWrite) error {
	var err error
	if h.confirm {
		_, err = tx.ExecContext(ctx, `INSERT INTO grab_hold (request_id, index_shard, hold_until_ms, confirmed_at) VALUES (?, ?, 0, ?)
			ON DUPLICATE KEY UPDATE confirmed_at = COALESCE(confirmed_at, VALUES(confirmed_at))`, h.requestID, h.indexShard, h.confirmedAt)
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO grab_hold (request_id, index_shard, hold_until_ms) VALUES (?, ?, ?)
			ON DUPLICATE KEY UPDATE hold_until_ms = VALUES(hold_until_ms)`, h.requestID, h.indexShard, h.untilMs)
	}
	if err != nil {
		return fmt.Errorf("insert flows: hold of %s: %w", h.requestID, err)
	}
	return nil
}

// OpenHold is a hold the record has no confirm of, on its shard's holds set.
type OpenHold struct {
	RequestID string `db:"request_id"`
	UntilMs   int64  `db:"hold_until_ms"`
}

// OpenHolds are the holds of the grants whose request index entries live on shard
// indexShard, not confirmed and not returned (no CANCEL of the request in the log):
// what a rebuild of that shard puts back on its holds set.
func (s *Store) OpenHolds(ctx context.Context, indexShard int) ([]OpenHold, error) {
	var out []OpenHold
	err := s.db.SelectContext(ctx, &out, `SELECT h.request_id, h.hold_until_ms FROM grab_hold h
		WHERE h.index_shard = ? AND h.confirmed_at IS NULL AND h.hold_until_ms > 0
		AND NOT EXISTS (SELECT 1 FROM grab_flow f WHERE f.request_id = h.request_id AND f.kind = 'CANCEL')
		ORDER BY h.request_id`, indexShard)
	if err != nil {
		return nil, fmt.Errorf("open holds of index shard %d: %w", indexShard, err)
	}
	return out, nil
}
