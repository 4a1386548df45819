package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/platform/internal/flow"
)

// InsertFlows writes flow events into grab_flow in one transaction and keeps each
// promotion's remaining in step. It is idempotent: a row already present (same
// request, kind and promotion) is skipped, so a redelivered event changes nothing.
// A CANCEL whose GRAB is not in the log is skipped too: it is the rollback of a grab
// that never reached the record, and there is nothing to net out. It returns the
// rows written.
func (s *Store) InsertFlows(ctx context.Context, events []flow.Event) (written int, err error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("insert flows: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	delta := map[ID]int64{}
	for _, e := range events {
		at, perr := time.Parse(time.RFC3339Nano, e.OccurredAt)
		if perr != nil {
			return 0, fmt.Errorf("insert flows: event %s: occurredAt: %w", e.EventID, perr)
		}
		for _, it := range e.Items {
			res, err := tx.ExecContext(ctx, insertFlowSQL(e.Kind),
				e.EventID, string(e.Kind), e.RequestID, e.Pin, e.IP, it.PromoID, it.Type, it.Num, it.Shard, at.UTC(),
				e.RequestID, it.PromoID, it.Type)
			if err != nil {
				return 0, fmt.Errorf("insert flows: %s %s %s_%d: %w", e.Kind, e.RequestID, it.PromoID, it.Type, err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				written++
				if e.Kind == flow.Grab {
					delta[ID{it.PromoID, it.Type}] -= it.Num
				} else {
					delta[ID{it.PromoID, it.Type}] += it.Num
				}
			}
		}
	}
	for id, d := range delta {
		if _, err := tx.ExecContext(ctx, `UPDATE promotion SET remaining = remaining + ? WHERE promo_id = ? AND promo_type = ?`, d, id.PromoID, id.Type); err != nil {
			return 0, fmt.Errorf("insert flows: remaining of %s: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("insert flows: commit: %w", err)
	}
	return written, nil
}

// insertFlowSQL inserts one row unless it is present; a CANCEL only when its GRAB is.
func insertFlowSQL(kind flow.Kind) string {
	// The three trailing arguments are the CANCEL condition's; a GRAB consumes them harmlessly.
	cond := "? IS NOT NULL AND ? IS NOT NULL AND ? IS NOT NULL"
	if kind == flow.Cancel {
		cond = `EXISTS (SELECT 1 FROM grab_flow g WHERE g.request_id = ? AND g.kind = 'GRAB' AND g.promo_id = ? AND g.promo_type = ?)`
	}
	return `INSERT IGNORE INTO grab_flow (event_id, kind, request_id, pin, ip, promo_id, promo_type, num, shard, occurred_at)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM DUAL WHERE ` + cond
}

// HasGrab reports whether the GRAB of requestID for the promotion is in the log:
// the reconciler's back-query before it returns an open take.
func (s *Store) HasGrab(ctx context.Context, requestID, promoID string, typ int) (bool, error) {
	var one int
	err := s.db.GetContext(ctx, &one, `SELECT 1 FROM grab_flow WHERE request_id = ? AND kind = 'GRAB' AND promo_id = ? AND promo_type = ?`, requestID, promoID, typ)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("has grab %s: %w", requestID, err)
	}
	return true, nil
}

// GrabItems returns the pin, ip and items of requestID's GRAB as the log holds them.
func (s *Store) GrabItems(ctx context.Context, requestID string) (pin, ip string, items []flow.Item, err error) {
	var rows []struct {
		Pin     string `db:"pin"`
		IP      string `db:"ip"`
		PromoID string `db:"promo_id"`
		Type    int    `db:"promo_type"`
		Num     int64  `db:"num"`
		Shard   int    `db:"shard"`
	}
	if err := s.db.SelectContext(ctx, &rows, `SELECT pin, ip, promo_id, promo_type, num, shard FROM grab_flow WHERE request_id = ? AND kind = 'GRAB' ORDER BY id`, requestID); err != nil {
		return "", "", nil, fmt.Errorf("grab items %s: %w", requestID, err)
	}
	for _, r := range rows {
		pin, ip = r.Pin, r.IP
		items = append(items, flow.Item{PromoID: r.PromoID, Type: r.Type, Num: r.Num, Shard: r.Shard})
	}
	return pin, ip, items, nil
}

// GrantedByRecord is the contract's sum: what a promotion has granted, by the log.
func (s *Store) GrantedByRecord(ctx context.Context, promoID string, typ int) (int64, error) {
	var n int64
	err := s.db.GetContext(ctx, &n, `SELECT COALESCE(SUM(CASE kind WHEN 'GRAB' THEN num ELSE -num END), 0) FROM grab_flow WHERE promo_id = ? AND promo_type = ?`, promoID, typ)
	if err != nil {
		return 0, fmt.Errorf("granted by record %s_%d: %w", promoID, typ, err)
	}
	return n, nil
}
