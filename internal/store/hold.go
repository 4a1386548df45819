package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// holdWrite is one grab_hold change (migration 0008): a GRAB's hold (its deadline),
// or a CONFIRM (when it was confirmed; zero for a GRAB).
type holdWrite struct {
	requestID   string
	indexShard  int
	untilMs     int64
	confirmedAt time.Time
}

// writeHolds records the batch's holds and confirms, in one statement per
// insertChunk rows, in request id order (two writers lock the rows in the same
// order and cannot deadlock on them). A GRAB's row brings the deadline, a
// CONFIRM's the time it was confirmed; each keeps what the other brought, so the
// two commute, a redelivery changes nothing, and the first confirm's time stands.
func writeHolds(ctx context.Context, tx sqlx.ExecerContext, holds []holdWrite) error {
	slices.SortFunc(holds, func(a, b holdWrite) int { return strings.Compare(a.requestID, b.requestID) })
	for chunk := range slices.Chunk(holds, insertChunk) {
		args := make([]any, 0, 4*len(chunk))
		for _, h := range chunk {
			var confirmedAt any // NULL for a GRAB
			if !h.confirmedAt.IsZero() {
				confirmedAt = h.confirmedAt
			}
			args = append(args, h.requestID, int64(h.indexShard), h.untilMs, confirmedAt)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO grab_hold (request_id, index_shard, hold_until_ms, confirmed_at) VALUES `+placeholders(len(chunk), 4)+
			` ON DUPLICATE KEY UPDATE hold_until_ms = GREATEST(hold_until_ms, VALUES(hold_until_ms)), confirmed_at = COALESCE(confirmed_at, VALUES(confirmed_at))`, args...); err != nil {
			return fmt.Errorf("insert flows: %d holds from %s: %w", len(chunk), chunk[0].requestID, err)
		}
	}
	return nil
}

// RecordedHold is a hold of the record: Open while neither confirmed nor returned.
type RecordedHold struct {
	RequestID string `db:"request_id"`
	UntilMs   int64  `db:"hold_until_ms"`
	Open      bool   `db:"open"`
}

// Holds are the holds of the grants whose request index entries live on shard
// indexShard, with deadlines at or after since: open ones (no confirm, and no
// CANCEL of the request in the log), which a rebuild of that shard puts back, and
// closed ones, which it takes away should a server that lagged still hold them.
func (f *Flows) Holds(ctx context.Context, indexShard int, since time.Time) ([]RecordedHold, error) {
	var out []RecordedHold
	err := f.db.SelectContext(ctx, &out, `SELECT h.request_id, h.hold_until_ms,
		h.confirmed_at IS NULL AND NOT EXISTS (SELECT 1 FROM grab_flow f WHERE f.request_id = h.request_id AND f.kind = 'CANCEL') AS open
		FROM grab_hold h WHERE h.index_shard = ? AND h.hold_until_ms >= ? ORDER BY h.request_id`, indexShard, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("holds of index shard %d: %w", indexShard, err)
	}
	return out, nil
}
