package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/flashsale/platform/internal/promo"
)

// An envelope pool's split (docs/CONTRACT.md, "Envelope pools") lives in
// promotion_envelope, one row per envelope, idx the order they are handed out in.
// It is written with the pool's row (InsertPool), goes with a create that is
// discarded, and stays when the pool is deleted.

// partsPerInsert bounds the rows of one INSERT of a pool's parts: a pool of
// promo.MaxEnvelopes parts is 100 statements of bounded size.
const partsPerInsert = 1000

// checkParts refuses parts that are not the spec's split: Total of them for a
// pool, none for a promotion that is no pool.
func checkParts(s promo.Spec, parts []int64) error {
	switch {
	case s.Envelope == nil && len(parts) > 0:
		return fmt.Errorf("%d envelope parts given for a promotion that is no pool", len(parts))
	case s.Envelope != nil && int64(len(parts)) != s.Total:
		return fmt.Errorf("a pool of %d envelopes given %d parts", s.Total, len(parts))
	}
	return nil
}

// insertParts writes parts (parts[i] the amount of envelope idx i) in tx,
// partsPerInsert rows per statement.
func insertParts(ctx context.Context, tx *sqlx.Tx, id ID, parts []int64) error {
	for from := 0; from < len(parts); from += partsPerInsert {
		to := min(from+partsPerInsert, len(parts))
		var q strings.Builder
		q.WriteString("INSERT INTO promotion_envelope (promo_id, promo_type, idx, amount) VALUES ")
		args := make([]any, 0, 4*(to-from))
		for i := from; i < to; i++ {
			if i > from {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?)")
			args = append(args, id.PromoID, id.Type, i, parts[i])
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("envelope parts %d..%d: %w", from, to-1, err)
		}
	}
	return nil
}

// deleteParts drops the split of id in tx (a discarded create's).
func deleteParts(ctx context.Context, tx *sqlx.Tx, id ID) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM promotion_envelope WHERE promo_id = ? AND promo_type = ?`, id.PromoID, id.Type)
	return err
}

// ErrNoParts is EnvelopeParts of a key the record holds no split for.
var ErrNoParts = errors.New("no envelope parts")

// EnvelopeSplit is an envelope pool as created: its budget and its split.
type EnvelopeSplit struct {
	Amount int64   // promotion.envelope_amount: the budget
	Parts  []int64 // promotion_envelope's amounts, by idx: the order they are handed out in
}

// ReadEnvelopeSplit reads the pool id from db: the one reader of a split, for
// promo-admin's create (EnvelopeParts), the rebuild, verify and the checker (which
// reads with a connection of its own). ok is false when the promotion is no pool
// (envelope_amount NULL) or not in the record; an error when the split's rows are
// not idx 0..n-1. The two reads need no transaction: a split changes only with
// a create that is discarded and made again, which no reader of a landed pool sees.
func ReadEnvelopeSplit(ctx context.Context, db sqlx.QueryerContext, id ID) (split EnvelopeSplit, ok bool, err error) {
	var amount sql.NullInt64
	err = sqlx.GetContext(ctx, db, &amount, `SELECT envelope_amount FROM promotion WHERE promo_id = ? AND promo_type = ?`, id.PromoID, id.Type)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !amount.Valid) {
		return split, false, nil
	}
	if err != nil {
		return split, false, fmt.Errorf("store: envelope pool of %s: %w", id, err)
	}
	var rows []struct {
		Idx    int   `db:"idx"`
		Amount int64 `db:"amount"`
	}
	if err := sqlx.SelectContext(ctx, db, &rows, `SELECT idx, amount FROM promotion_envelope
 WHERE promo_id = ? AND promo_type = ? ORDER BY idx`, id.PromoID, id.Type); err != nil {
		return split, false, fmt.Errorf("store: envelope split of %s: %w", id, err)
	}
	split.Amount, split.Parts = amount.Int64, make([]int64, len(rows))
	for i, r := range rows {
		if r.Idx != i {
			return split, false, fmt.Errorf("store: envelope split of %s: idx %d where %d belongs (the split has a gap)", id, r.Idx, i)
		}
		split.Parts[i] = r.Amount
	}
	return split, true, nil
}

// EnvelopeSplit is ReadEnvelopeSplit on the store's connections.
func (r *Rebuild) EnvelopeSplit(ctx context.Context, id ID) (EnvelopeSplit, bool, error) {
	return ReadEnvelopeSplit(ctx, r.db, id)
}

// EnvelopeParts is the split of the pool id as created: the amount of every
// envelope, in idx order (the order they are handed out in). It is what a pool's
// Redis create writes, so that Redis holds exactly the record's split. ErrNoParts
// when there is none; an error when the rows are not idx 0..n-1.
func (s *Promotions) EnvelopeParts(ctx context.Context, id ID) ([]int64, error) {
	split, ok, err := ReadEnvelopeSplit(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	if !ok || len(split.Parts) == 0 {
		return nil, fmt.Errorf("store: envelope parts of %s: %w", id, ErrNoParts)
	}
	return split.Parts, nil
}
