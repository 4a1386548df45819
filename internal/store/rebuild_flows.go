package store

import (
	"context"
	"fmt"
)

// FlowCounters is what the flow log says a promotion's Redis counters hold.
type FlowCounters struct {
	Granted  int64            // Σ num of GRAB rows
	Returned int64            // Σ num of CANCEL rows
	Pins     map[string]int64 // pin -> Σ GRAB − Σ CANCEL, zero nets left out
	IPs      map[string]int64 // ip -> Σ GRAB − Σ CANCEL, zero nets left out
}

// Net is what the promotion holds granted by the record: the contract's sum.
func (c FlowCounters) Net() int64 { return c.Granted - c.Returned }

// FlowCounters sums the flow log of one promotion.
func (s *Store) FlowCounters(ctx context.Context, id ID) (FlowCounters, error) {
	out := FlowCounters{Pins: map[string]int64{}, IPs: map[string]int64{}}
	var kinds []struct {
		Kind string `db:"kind"`
		Sum  int64  `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &kinds, `SELECT kind, COALESCE(SUM(num), 0) AS n FROM grab_flow
 WHERE promo_id = ? AND promo_type = ? GROUP BY kind`, id.PromoID, id.Type); err != nil {
		return out, fmt.Errorf("store: flow counters %s: %w", id, err)
	}
	for _, k := range kinds {
		if k.Kind == "GRAB" {
			out.Granted = k.Sum
		} else {
			out.Returned = k.Sum
		}
	}
	for col, dst := range map[string]map[string]int64{"pin": out.Pins, "ip": out.IPs} {
		var nets []struct {
			Who string `db:"who"`
			Net int64  `db:"net"`
		}
		// col is one of two constants above, never input.
		q := `SELECT ` + col + ` AS who, SUM(CASE kind WHEN 'GRAB' THEN num ELSE -num END) AS net
 FROM grab_flow WHERE promo_id = ? AND promo_type = ? GROUP BY ` + col + ` HAVING net <> 0`
		if err := s.db.SelectContext(ctx, &nets, q, id.PromoID, id.Type); err != nil {
			return out, fmt.Errorf("store: flow counters %s by %s: %w", id, col, err)
		}
		for _, n := range nets {
			dst[n.Who] = n.Net
		}
	}
	return out, nil
}

// LedgerRow is one granted request of a promotion as the record holds it: its GRAB
// row and, when it was returned, whether a CANCEL followed and why.
type LedgerRow struct {
	RequestID    string `db:"request_id"`
	Pin          string `db:"pin"`
	IP           string `db:"ip"`
	Num          int64  `db:"num"`
	BodyHash     string `db:"body_hash"`
	Cancelled    bool   `db:"cancelled"`
	CancelReason string `db:"cancel_reason"`
}

// EachLedgerRow streams the promotion's GRAB rows joined with their CANCEL, so a
// promotion with millions of grants is rebuilt without holding them all in memory.
// fn's error stops the walk and is returned.
func (s *Store) EachLedgerRow(ctx context.Context, id ID, fn func(LedgerRow) error) error {
	rows, err := s.db.QueryxContext(ctx, `SELECT g.request_id, g.pin, g.ip, g.num, g.body_hash,
 c.id IS NOT NULL AS cancelled, COALESCE(c.reason, '') AS cancel_reason
 FROM grab_flow g
 LEFT JOIN grab_flow c ON c.request_id = g.request_id AND c.kind = 'CANCEL'
  AND c.promo_id = g.promo_id AND c.promo_type = g.promo_type
 WHERE g.promo_id = ? AND g.promo_type = ? AND g.kind = 'GRAB'`, id.PromoID, id.Type)
	if err != nil {
		return fmt.Errorf("store: ledger of %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var r LedgerRow
		if err := rows.StructScan(&r); err != nil {
			return fmt.Errorf("store: ledger of %s: %w", id, err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: ledger of %s: %w", id, err)
	}
	return nil
}
