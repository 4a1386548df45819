package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/flashsale/platform/internal/flow"
)

// A CANCEL may reach the record before its GRAB: a GRAB dead-lettered and replayed
// later, or the two on different partitions after the flow topic gained some.
// Dropped, the GRAB would later count as sold for good; so such a CANCEL is parked
// in grab_flow_early and moved into grab_flow, netted, in the transaction that
// writes its GRAB (migration 0009).

// grabOf is the key of the GRAB a CANCEL row nets.
func grabOf(k flowKey) flowKey {
	k.kind = flow.Grab
	return k
}

// unparkInBatch keeps the parked CANCELs whose GRAB came later in the same batch.
func (w *flowBatch) unparkInBatch() {
	parked := w.parked[:0]
	for _, r := range w.parked {
		switch {
		case w.present[r.key]: // a repeat of one kept meanwhile
		case w.present[grabOf(r.key)]:
			w.keep(r)
		default:
			parked = append(parked, r)
		}
	}
	clear(w.parked[len(parked):])
	w.parked = parked
}

// park writes the CANCELs still waiting for their GRAB to grab_flow_early; one
// there already (a redelivery) is left as it is.
func (w *flowBatch) park(ctx context.Context, tx *sql.Tx) error {
	for _, r := range w.parked {
		args := w.appendRow(nil, r)
		if _, err := tx.ExecContext(ctx, "INSERT IGNORE INTO grab_flow_early ("+flowColumns+") VALUES "+placeholders(1, rowColumns), args...); err != nil {
			return fmt.Errorf("insert flows: park the CANCEL of %s before its GRAB: %w", r.key.requestID, err)
		}
	}
	return nil
}

// earlyRow is a parked CANCEL.
type earlyRow struct {
	RequestID string `db:"request_id"`
	PromoID   string `db:"promo_id"`
	Type      int    `db:"promo_type"`
	Num       int64  `db:"num"`
}

// adoptEarly moves into grab_flow the parked CANCELs of the GRABs this batch
// writes, and nets them with the batch.
func (w *flowBatch) adoptEarly(ctx context.Context, tx *sql.Tx) error {
	if len(w.grabbed) == 0 {
		return nil
	}
	rows, err := w.earlyOf(ctx, tx)
	if err != nil {
		return err
	}
	for _, e := range rows {
		k := flowKey{e.RequestID, flow.Cancel, ID{e.PromoID, e.Type}}
		if !w.present[k] { // else the CANCEL came again since: the parked copy goes
			if err := moveEarly(ctx, tx, e, "INSERT INTO grab_flow ("+flowColumns+") SELECT "+flowColumns+" FROM grab_flow_early"); err != nil {
				return err
			}
			w.present[k] = true
			w.delta[k.id] += e.Num
		}
		if err := moveEarly(ctx, tx, e, "DELETE FROM grab_flow_early"); err != nil {
			return err
		}
	}
	return nil
}

// earlyOf reads the parked CANCELs of the batch's GRABs.
func (w *flowBatch) earlyOf(ctx context.Context, tx *sql.Tx) ([]earlyRow, error) {
	res, err := tx.QueryContext(ctx, "SELECT request_id, promo_id, promo_type, num FROM grab_flow_early WHERE request_id IN "+
		placeholders(1, len(w.grabbed)), w.grabbed...)
	if err != nil {
		return nil, fmt.Errorf("insert flows: look up early CANCELs: %w", err)
	}
	defer res.Close()
	var out []earlyRow
	for res.Next() {
		var e earlyRow
		if err := res.Scan(&e.RequestID, &e.PromoID, &e.Type, &e.Num); err != nil {
			return nil, fmt.Errorf("insert flows: look up early CANCELs: %w", err)
		}
		if w.present[grabOf(flowKey{e.RequestID, flow.Cancel, ID{e.PromoID, e.Type}})] {
			out = append(out, e)
		}
	}
	return out, res.Err()
}

// moveEarly runs stmt (an INSERT ... SELECT or a DELETE of grab_flow_early) on the
// parked CANCEL e.
func moveEarly(ctx context.Context, tx *sql.Tx, e earlyRow, stmt string) error {
	_, err := tx.ExecContext(ctx, stmt+" WHERE request_id = ? AND kind = 'CANCEL' AND promo_id = ? AND promo_type = ?", e.RequestID, e.PromoID, e.Type)
	if err != nil {
		return fmt.Errorf("insert flows: the early CANCEL of %s: %w", e.RequestID, err)
	}
	return nil
}
