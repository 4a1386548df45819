package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/platform/internal/flow"
)

// Owed CANCELs: a copy of each CANCEL the log could not take yet (its GRAB is not
// there), kept until its GRAB arrives, so a debt a lost shard took along from
// Redis is still paid. A copy is settled only against a GRAB that occurred before
// it. Why: docs/design.md, "Rollbacks and owed CANCELs" and "Record and recovery".

// OwedKeep is how long a copy waits for its GRAB. A GRAB that reached Kafka reaches
// the log within the sink's lag, so a copy still unsettled after a day is the
// rollback of a grab no record ever got.
const OwedKeep = 24 * time.Hour

// OweCancels keeps a copy of CANCEL events, one row per item; a copy already kept
// stays as it is.
func (f *Flows) OweCancels(ctx context.Context, events []flow.Event) error {
	var rows [][5]any
	for _, e := range events {
		if e.Kind != flow.Cancel {
			return fmt.Errorf("owe cancels: %s %s is not a CANCEL", e.Kind, e.RequestID)
		}
		at, err := time.Parse(time.RFC3339Nano, e.OccurredAt)
		if err != nil {
			return fmt.Errorf("owe cancels: %s: occurredAt: %w", e.RequestID, err)
		}
		for _, it := range e.Items {
			one := e
			one.Items = []flow.Item{it}
			b, err := json.Marshal(one)
			if err != nil {
				return fmt.Errorf("owe cancels: encode %s: %w", e.RequestID, err)
			}
			rows = append(rows, [5]any{e.RequestID, it.PromoID, it.Type, string(b), ms(at)})
		}
	}
	for chunk := range slices.Chunk(rows, insertChunk) {
		q := `INSERT IGNORE INTO owed_cancel (request_id, promo_id, promo_type, event, occurred_at) VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", len(chunk)), ", ")
		args := make([]any, 0, 5*len(chunk))
		for _, r := range chunk {
			args = append(args, r[:]...)
		}
		if _, err := f.db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("owe cancels: %w", err)
		}
	}
	return nil
}

// settleBatch bounds the copies one settle writes; the next pass takes the rest.
const settleBatch = 1000

// SettleOwedCancels writes into the flow log owed CANCELs whose GRAB is there now
// (occurred before them) and forgets them, forgets the copies owed longer than keep,
// and returns the CANCEL rows it wrote. A copy it cannot decode is left to age out.
// A writer racing it on the same rows (the sink's own batches) makes it try again.
func (f *Flows) SettleOwedCancels(ctx context.Context, keep time.Duration) (int, error) {
	var written int
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if written, err = f.settleOwed(ctx); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	if _, err := f.db.ExecContext(ctx, `DELETE FROM owed_cancel WHERE owed_at < NOW(3) - INTERVAL ? SECOND`, int64(keep.Seconds())); err != nil {
		return written, fmt.Errorf("settle owed cancels: forget the stale: %w", err)
	}
	return written, nil
}

func (f *Flows) settleOwed(ctx context.Context) (int, error) {
	var rows []struct {
		RequestID string `db:"request_id"`
		PromoID   string `db:"promo_id"`
		Type      int    `db:"promo_type"`
		Event     string `db:"event"`
	}
	if err := f.db.SelectContext(ctx, &rows, `SELECT o.request_id, o.promo_id, o.promo_type, o.event FROM owed_cancel o
 WHERE EXISTS (SELECT 1 FROM grab_flow g WHERE g.request_id = o.request_id AND g.kind = 'GRAB'
   AND g.promo_id = o.promo_id AND g.promo_type = o.promo_type AND g.occurred_at <= o.occurred_at)
 LIMIT ?`, settleBatch); err != nil {
		return 0, fmt.Errorf("settle owed cancels: %w", err)
	}
	var events []flow.Event
	var settled []any
	for _, r := range rows {
		e, err := flow.Decode([]byte(r.Event))
		if err != nil {
			continue // written by a producer of another schema: it ages out
		}
		events = append(events, e)
		settled = append(settled, r.RequestID, r.PromoID, r.Type)
	}
	if len(events) == 0 {
		return 0, nil
	}
	written, err := f.InsertFlows(ctx, events)
	if err != nil {
		return 0, fmt.Errorf("settle owed cancels: %w", err)
	}
	q := `DELETE FROM owed_cancel WHERE (request_id, promo_id, promo_type) IN (` +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(events)), ", ") + `)`
	if _, err := f.db.ExecContext(ctx, q, settled...); err != nil {
		return written, fmt.Errorf("settle owed cancels: forget the settled: %w", err)
	}
	return written, nil
}

// Granted reports whether the record holds requestID's take of the promotion as
// granted: its GRAB is in the log, and no CANCEL of it is there or owed (a copy
// that occurred after the GRAB). The reconciler asks it of a take left open: a Redis
// failover can lose the abort of a take whose GRAB reached the record and bring the
// take back pending; its CANCEL, stored or owed, says the buyer was told no, so the
// take is returned, not committed. (A CANCEL Kafka took that the sink has not
// stored yet is not seen, as before.)
func (f *Flows) Granted(ctx context.Context, requestID, promoID string, typ int) (bool, error) {
	var granted bool
	err := f.db.GetContext(ctx, &granted, `SELECT EXISTS (SELECT 1 FROM grab_flow g
   WHERE g.request_id = ? AND g.kind = 'GRAB' AND g.promo_id = ? AND g.promo_type = ?
   AND NOT EXISTS (SELECT 1 FROM grab_flow c WHERE c.request_id = g.request_id AND c.kind = 'CANCEL'
     AND c.promo_id = g.promo_id AND c.promo_type = g.promo_type)
   AND NOT EXISTS (SELECT 1 FROM owed_cancel o WHERE o.request_id = g.request_id
     AND o.promo_id = g.promo_id AND o.promo_type = g.promo_type AND o.occurred_at >= g.occurred_at))`,
		requestID, promoID, typ)
	if err != nil {
		return false, fmt.Errorf("granted %s: %w", requestID, err)
	}
	return granted, nil
}
