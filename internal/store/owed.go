package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/flashsale/platform/internal/flow"
)

// Owed CANCELs. grab-service owes a CANCEL when it has given a take back in Redis
// whose GRAB may be in the record: the rollback of a grab Kafka did not acknowledge,
// or a buyer's cancel. When Kafka refuses it and the GRAB is not in the flow log yet
// (still in Kafka, or never written), the log cannot take it either: InsertFlows
// skips a CANCEL without its GRAB, rightly for the rollback of a grab no record ever
// got. The debt then lives in the shard's Redis ledger until the reconciler pays
// it, and a shard lost meanwhile took it along: the rebuild restored as granted a
// unit Redis had given back. OweCancels keeps a copy here, and SettleOwedCancels,
// which the rebuild runs before it reads the record, writes into the log those
// whose GRAB has arrived. The copy is a backup, never the only path: the debt stays
// in Redis until Kafka or the log has it, and a CANCEL written twice is skipped the
// second time (InsertFlows is idempotent).

// OweCancels keeps a copy of CANCEL events, one row per item; a copy already kept
// stays as it is.
func (s *Store) OweCancels(ctx context.Context, events []flow.Event) error {
	var q strings.Builder
	var args []any
	q.WriteString(`INSERT IGNORE INTO owed_cancel (request_id, promo_id, promo_type, event) VALUES `)
	for _, e := range events {
		if e.Kind != flow.Cancel {
			return fmt.Errorf("owe cancels: %s %s is not a CANCEL", e.Kind, e.RequestID)
		}
		for _, it := range e.Items {
			one := e
			one.Items = []flow.Item{it}
			b, err := json.Marshal(one)
			if err != nil {
				return fmt.Errorf("owe cancels: encode %s: %w", e.RequestID, err)
			}
			if len(args) > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?)")
			args = append(args, e.RequestID, it.PromoID, it.Type, string(b))
		}
	}
	if len(args) == 0 {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("owe cancels: %w", err)
	}
	return nil
}

// SettleOwedCancels writes into the flow log every owed CANCEL whose GRAB is there
// now and forgets it, forgets the copies owed longer than keep (a GRAB that late
// will not come), and returns the CANCEL rows it wrote.
func (s *Store) SettleOwedCancels(ctx context.Context, keep time.Duration) (int, error) {
	var rows []struct {
		RequestID string `db:"request_id"`
		PromoID   string `db:"promo_id"`
		Type      int    `db:"promo_type"`
		Event     string `db:"event"`
	}
	if err := s.db.SelectContext(ctx, &rows, `SELECT o.request_id, o.promo_id, o.promo_type, o.event FROM owed_cancel o
 WHERE EXISTS (SELECT 1 FROM grab_flow g WHERE g.request_id = o.request_id AND g.kind = 'GRAB'
   AND g.promo_id = o.promo_id AND g.promo_type = o.promo_type)`); err != nil {
		return 0, fmt.Errorf("settle owed cancels: %w", err)
	}
	events := make([]flow.Event, 0, len(rows))
	for _, r := range rows {
		e, err := flow.Decode([]byte(r.Event))
		if err != nil {
			return 0, fmt.Errorf("settle owed cancels: %s: %w", r.RequestID, err)
		}
		events = append(events, e)
	}
	written, err := s.InsertFlows(ctx, events)
	if err != nil {
		return 0, fmt.Errorf("settle owed cancels: %w", err)
	}
	for _, r := range rows { // few: each is a double fault's leftover
		if _, err := s.db.ExecContext(ctx, `DELETE FROM owed_cancel WHERE request_id = ? AND promo_id = ? AND promo_type = ?`,
			r.RequestID, r.PromoID, r.Type); err != nil {
			return written, fmt.Errorf("settle owed cancels: forget %s: %w", r.RequestID, err)
		}
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM owed_cancel WHERE owed_at < NOW(3) - INTERVAL ? SECOND`, int64(keep.Seconds())); err != nil {
		return written, fmt.Errorf("settle owed cancels: forget the stale: %w", err)
	}
	return written, nil
}

// Granted reports whether the record holds requestID's take of the promotion as
// granted: its GRAB is in the log, and its CANCEL is neither there nor owed. The
// reconciler asks it of a take left open: a Redis failover can lose the abort of a
// take whose GRAB reached the record, and bring the take back pending; its CANCEL,
// sunk or owed, says the buyer was told no, so the take is returned, not committed.
func (s *Store) Granted(ctx context.Context, requestID, promoID string, typ int) (bool, error) {
	var granted bool
	err := s.db.GetContext(ctx, &granted, `SELECT EXISTS (SELECT 1 FROM grab_flow
   WHERE request_id = ? AND kind = 'GRAB' AND promo_id = ? AND promo_type = ?)
 AND NOT EXISTS (SELECT 1 FROM grab_flow WHERE request_id = ? AND kind = 'CANCEL' AND promo_id = ? AND promo_type = ?)
 AND NOT EXISTS (SELECT 1 FROM owed_cancel WHERE request_id = ? AND promo_id = ? AND promo_type = ?)`,
		requestID, promoID, typ, requestID, promoID, typ, requestID, promoID, typ)
	if err != nil {
		return false, fmt.Errorf("granted %s: %w", requestID, err)
	}
	return granted, nil
}
