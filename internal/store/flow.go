package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
)

// InsertFlows writes flow events into grab_flow in one transaction and keeps each
// promotion's remaining in step. It is idempotent: a row already present (same
// request, kind and promotion) is skipped, so a redelivered event changes nothing.
// A CANCEL whose GRAB is not in the log is skipped too: it is the rollback of a grab
// that never reached the record, and there is nothing to net out. It returns the
// rows written.
//
// One SELECT finds which rows are present, then multi-row INSERTs write the rest
// (a batch costs a few statements, not one per row). If another writer inserts one
// of them in between, the INSERT fails on the unique key and the whole transaction
// is refused; the caller's retry then finds the row present.
func (s *Store) InsertFlows(ctx context.Context, events []flow.Event) (written int, err error) {
	rows, err := flowRowsOf(events)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("insert flows: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	present, err := presentFlows(ctx, tx, rows)
	if err != nil {
		return 0, err
	}
	var fresh []newFlow
	delta := map[ID]int64{}
	for _, r := range rows {
		if present[r.key] {
			continue
		}
		if r.key.kind == flow.Cancel {
			g := r.key
			g.kind = flow.Grab
			if !present[g] {
				continue
			}
		}
		present[r.key] = true // a repeat within the batch is skipped too
		fresh = append(fresh, r)
		if r.key.kind == flow.Grab {
			delta[r.key.id] -= r.num
		} else {
			delta[r.key.id] += r.num
		}
	}
	for chunk := range slices.Chunk(fresh, insertChunk) {
		q, args := insertFlowsSQL(chunk)
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return 0, fmt.Errorf("insert flows: %d rows from %s %s: %w", len(chunk), chunk[0].key.kind, chunk[0].key.requestID, err)
		}
	}
	// In key order, so two writers (the sink's batches, its owed-CANCEL pass) lock the
	// promotion rows in the same order and cannot deadlock on them.
	ids := slices.SortedFunc(maps.Keys(delta), func(a, b ID) int { return strings.Compare(a.Key(), b.Key()) })
	for _, id := range ids {
		d := delta[id]
		if _, err := tx.ExecContext(ctx, `UPDATE promotion SET remaining = remaining + ? WHERE promo_id = ? AND promo_type = ?`, d, id.PromoID, id.Type); err != nil {
			return 0, fmt.Errorf("insert flows: remaining of %s: %w", id, err)
		}
	}
	if err := commit(ctx, tx); err != nil {
		return 0, fmt.Errorf("insert flows: commit: %w", err)
	}
	return len(fresh), nil
}

// insertChunk bounds the rows of one INSERT (and the request ids of one lookup).
const insertChunk = 500

// flowKey is grab_flow's unique key.
type flowKey struct {
	requestID string
	kind      flow.Kind
	id        ID
}

// newFlow is one grab_flow row to write: one item of one event.
type newFlow struct {
	key              flowKey
	e                *flow.Event
	num              int64
	shard            int
	indexShard       int // migration 0003: where the request's index entry lives
	at               time.Time
	bodyHash, reason string
}

func flowRowsOf(events []flow.Event) ([]newFlow, error) {
	var rows []newFlow
	for i := range events {
		e := &events[i]
		at, err := time.Parse(time.RFC3339Nano, e.OccurredAt)
		if err != nil {
			return nil, fmt.Errorf("insert flows: event %s: occurredAt: %w", e.EventID, err)
		}
		indexShard := ring.Default.Shard(promo.RequestIndexKey(e.RequestID))
		for _, it := range e.Items {
			r := newFlow{key: flowKey{e.RequestID, e.Kind, ID{it.PromoID, it.Type}}, e: e, num: it.Num, shard: it.Shard, at: at.UTC(), indexShard: indexShard}
			if e.Kind == flow.Grab { // migration 0002's columns: a GRAB's hash, a CANCEL's reason
				r.bodyHash = e.BodyHash
			} else {
				r.reason = e.Reason
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// presentFlows returns which of the rows' requests already have rows, of any kind
// and promotion, by their unique key.
func presentFlows(ctx context.Context, tx *sqlx.Tx, rows []newFlow) (map[flowKey]bool, error) {
	seen := map[string]bool{}
	var ids []string
	for _, r := range rows {
		if !seen[r.key.requestID] {
			seen[r.key.requestID] = true
			ids = append(ids, r.key.requestID)
		}
	}
	present := map[flowKey]bool{}
	for chunk := range slices.Chunk(ids, insertChunk) {
		q, args, err := sqlx.In(`SELECT request_id, kind, promo_id, promo_type FROM grab_flow WHERE request_id IN (?)`, chunk)
		if err != nil {
			return nil, fmt.Errorf("insert flows: %w", err)
		}
		res, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("insert flows: look up present rows: %w", err)
		}
		for res.Next() {
			var k flowKey
			if err := res.Scan(&k.requestID, &k.kind, &k.id.PromoID, &k.id.Type); err != nil {
				res.Close()
				return nil, fmt.Errorf("insert flows: look up present rows: %w", err)
			}
			present[k] = true
		}
		if err := res.Close(); err != nil {
			return nil, fmt.Errorf("insert flows: look up present rows: %w", err)
		}
		if err := res.Err(); err != nil {
			return nil, fmt.Errorf("insert flows: look up present rows: %w", err)
		}
	}
	return present, nil
}

func insertFlowsSQL(rows []newFlow) (string, []any) {
	var b strings.Builder
	b.WriteString(`INSERT INTO grab_flow (event_id, kind, request_id, pin, ip, promo_id, promo_type, num, shard, occurred_at, body_hash, reason, index_shard) VALUES `)
	args := make([]any, 0, 13*len(rows))
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, r.e.EventID, string(r.key.kind), r.key.requestID, r.e.Pin, r.e.IP,
			r.key.id.PromoID, r.key.id.Type, r.num, r.shard, r.at, r.bodyHash, r.reason, r.indexShard)
	}
	return b.String(), args
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
