package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Archive keeps the record in bounds: the promotions whose sale ended before a
// cutoff are marked archived (no longer what the shards must hold), their flow
// rows move to grab_flow_archive a batch at a time, and the holds settled before
// the cutoff are purged. Every step is its own transaction and may be repeated:
// a run cut short is finished by the next (recovery archive).
type Archive struct {
	db *sqlx.DB
}

// MarkEnded marks archived every committed promotion whose sale ended before
// cutoff, with no admin change pending, and reports how many it marked. Marked
// first, before any row moves, so no rebuild or verify ever reads a promotion
// whose rows are half moved.
func (a *Archive) MarkEnded(ctx context.Context, cutoff time.Time) (int64, error) {
	r, err := a.db.ExecContext(ctx, `UPDATE promotion SET archived_at = UTC_TIMESTAMP(3)
 WHERE archived_at IS NULL AND version > 0 AND pending_at IS NULL AND end_at < ?`, cutoff.UTC())
	if err != nil {
		return 0, fmt.Errorf("store: mark promotions ended before %s archived: %w", cutoff.UTC().Format(time.RFC3339), err)
	}
	return r.RowsAffected()
}

// ArchivedRows lists the archived promotions whose flow rows are still in
// grab_flow, with how many: what MoveFlows has left to do.
func (a *Archive) ArchivedRows(ctx context.Context) (map[ID]int64, error) {
	out, err := countsByID[int64](ctx, a.db, `SELECT f.promo_id, f.promo_type, COUNT(*) AS n FROM promotion p
 JOIN grab_flow f ON f.promo_id = p.promo_id AND f.promo_type = p.promo_type
 WHERE p.archived_at IS NOT NULL GROUP BY f.promo_id, f.promo_type`)
	if err != nil {
		return nil, fmt.Errorf("store: archived promotions' rows: %w", err)
	}
	return out, nil
}

// MoveFlows moves up to batch flow rows of an archived promotion from grab_flow to
// grab_flow_archive, in one transaction, and reports how many (0: none left).
func (a *Archive) MoveFlows(ctx context.Context, id ID, batch int) (int, error) {
	if batch < 1 {
		return 0, fmt.Errorf("store: archive %s: batch %d, want at least 1", id, batch)
	}
	tx, err := a.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: archive %s: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	var archived bool
	if err := tx.GetContext(ctx, &archived, `SELECT archived_at IS NOT NULL FROM promotion WHERE promo_id = ? AND promo_type = ? FOR UPDATE`, id.PromoID, id.Type); err != nil {
		return 0, fmt.Errorf("store: archive %s: %w", id, err)
	}
	if !archived {
		return 0, fmt.Errorf("store: archive %s: the promotion is not marked archived", id)
	}
	var ids []int64
	if err := tx.SelectContext(ctx, &ids, `SELECT id FROM grab_flow WHERE promo_id = ? AND promo_type = ? ORDER BY id LIMIT ? FOR UPDATE`, id.PromoID, id.Type, batch); err != nil {
		return 0, fmt.Errorf("store: archive %s: %w", id, err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	in, args, err := sqlx.In(`id IN (?)`, ids)
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT IGNORE INTO grab_flow_archive SELECT * FROM grab_flow WHERE `+in, args...); err != nil {
		return 0, fmt.Errorf("store: archive %s: copy %d rows: %w", id, len(ids), err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM grab_flow WHERE `+in, args...); err != nil {
		return 0, fmt.Errorf("store: archive %s: delete %d rows: %w", id, len(ids), err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: archive %s: %w", id, err)
	}
	return len(ids), nil
}

// PurgeHolds deletes up to batch holds settled before cutoff (confirmed, or past
// their deadline, after which the reconciler gave the stock back) and reports how
// many (0: none left). A rebuild reads only holds whose deadline is recent.
func (a *Archive) PurgeHolds(ctx context.Context, cutoff time.Time, batch int) (int64, error) {
	r, err := a.db.ExecContext(ctx, `DELETE FROM grab_hold WHERE (confirmed_at IS NOT NULL AND confirmed_at < ?)
 OR (hold_until_ms > 0 AND hold_until_ms < ?) LIMIT ?`, cutoff.UTC(), cutoff.UnixMilli(), batch)
	if err != nil {
		return 0, fmt.Errorf("store: purge holds settled before %s: %w", cutoff.UTC().Format(time.RFC3339), err)
	}
	return r.RowsAffected()
}

// ArchivedFlowCount counts a promotion's rows in grab_flow_archive (tests, reports).
func (a *Archive) ArchivedFlowCount(ctx context.Context, id ID) (int64, error) {
	var n int64
	err := a.db.GetContext(ctx, &n, `SELECT COUNT(*) FROM grab_flow_archive WHERE promo_id = ? AND promo_type = ?`, id.PromoID, id.Type)
	if err != nil {
		return 0, fmt.Errorf("store: archived rows of %s: %w", id, err)
	}
	return n, nil
}
