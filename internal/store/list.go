package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/flashsale/platform/internal/promo"
)

// List limits.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)

// ListQuery selects a page of committed promotions, newest first.
type ListQuery struct {
	// State filters by the state the API shows. The stored states (STOPPED, DELETED)
	// match the column; the others are derived from it as promo.DeriveState does,
	// with the record's remaining, at Now. "" lists every promotion but the deleted.
	State promo.State
	Now   time.Time
	// Limit is 1..MaxListLimit; 0 means DefaultListLimit.
	Limit int
	// Cursor is the NextCursor of the previous page, "" for the first.
	Cursor string
}

// Page is one page of List; NextCursor is "" on the last page.
type Page struct {
	Items      []Promotion
	NextCursor string
}

// cursor is the position after the last row of a page in (created_at, promo_id,
// promo_type) descending order. It travels base64url-encoded JSON, opaque to clients.
type cursor struct {
	CreatedMs int64  `json:"c"`
	PromoID   string `json:"p"`
	Type      int    `json:"t"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, ErrBadCursor
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || !promo.ValidPromoID(c.PromoID) || !promo.ValidType(c.Type) || c.CreatedMs < 0 {
		return cursor{}, ErrBadCursor
	}
	return c, nil
}

// ValidCursor reports whether s is a cursor List accepts.
func ValidCursor(s string) bool {
	_, err := decodeCursor(s)
	return err == nil
}

// remainingAmountColumn is an envelope pool's amount not handed out, by the record
// (docs/CONTRACT.md, "Envelope pools"): its budget less what its GRAB rows took plus
// what its CANCEL rows gave back; NULL for a promotion that is no pool. It is the
// amounts' counterpart of the remaining column the flow sink keeps.
const remainingAmountColumn = `IF(envelope_amount IS NULL, NULL, envelope_amount - (
 SELECT COALESCE(SUM(CASE g.kind WHEN 'GRAB' THEN g.amount ELSE -g.amount END), 0) FROM grab_flow g
 WHERE g.promo_id = promotion.promo_id AND g.promo_type = promotion.promo_type)) AS remaining_amount`

// List returns a page of committed promotions, newest first (ties by key).
func (s *Promotions) List(ctx context.Context, q ListQuery) (Page, error) {
	limit := q.Limit
	switch {
	case limit == 0:
		limit = DefaultListLimit
	case limit < 0 || limit > MaxListLimit:
		return Page{}, fmt.Errorf("store: list: limit %d outside 1..%d", limit, MaxListLimit)
	}
	where, args, err := listFilter(q)
	if err != nil {
		return Page{}, err
	}
	args = append(args, limit+1)
	var rows []promotionRow
	err = s.db.SelectContext(ctx, &rows, `SELECT `+promotionColumns+`, `+remainingAmountColumn+` FROM promotion
 WHERE `+strings.Join(where, " AND ")+`
 ORDER BY created_at DESC, promo_id DESC, promo_type DESC LIMIT ?`, args...)
	if err != nil {
		return Page{}, fmt.Errorf("store: list: %w", err)
	}
	return pageOf(rows, limit)
}

// listFilter is the WHERE of q's page: committed rows, q's state, after q's cursor.
func listFilter(q ListQuery) (where []string, args []any, err error) {
	where, args, err = stateFilter(q.State, ms(q.Now))
	if err != nil {
		return nil, nil, err
	}
	where = append([]string{"version > 0"}, where...)
	if q.Cursor != "" {
		c, err := decodeCursor(q.Cursor)
		if err != nil {
			return nil, nil, fmt.Errorf("store: list: %w", err)
		}
		at := time.UnixMilli(c.CreatedMs).UTC()
		where = append(where, `(created_at < ? OR (created_at = ? AND (promo_id < ? OR (promo_id = ? AND promo_type < ?))))`)
		args = append(args, at, at, c.PromoID, c.PromoID, c.Type)
	}
	return where, args, nil
}

// stateFilter is the condition on the state the API shows: the stored states
// match the column, the others are derived as promo.DeriveState does, at now.
func stateFilter(state promo.State, now time.Time) ([]string, []any, error) {
	switch state {
	case "":
		return []string{"state <> 'DELETED'"}, nil, nil
	case promo.Stopped, promo.Deleted:
		return []string{"state = ?"}, []any{string(state)}, nil
	case promo.Scheduled:
		return []string{"state = 'ACTIVE' AND ? < start_at"}, []any{now}, nil
	case promo.Ended:
		return []string{"state = 'ACTIVE' AND start_at <= ? AND end_at <= ?"}, []any{now, now}, nil
	case promo.SoldOut:
		return []string{"state = 'ACTIVE' AND start_at <= ? AND ? < end_at AND remaining <= 0"}, []any{now, now}, nil
	case promo.Active:
		return []string{"state = 'ACTIVE' AND start_at <= ? AND ? < end_at AND remaining > 0"}, []any{now, now}, nil
	}
	return nil, nil, fmt.Errorf("store: list: unknown state %q", state)
}

// pageOf is the page of the rows read, one more than limit when a page follows.
func pageOf(rows []promotionRow, limit int) (Page, error) {
	var page Page
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.NextCursor = cursor{CreatedMs: last.CreatedAt.UnixMilli(), PromoID: last.PromoID, Type: last.PromoType}.encode()
	}
	page.Items = make([]Promotion, 0, len(rows))
	for _, r := range rows {
		p, err := r.promotion()
		if err != nil {
			return Page{}, fmt.Errorf("store: list: %w", err)
		}
		page.Items = append(page.Items, p)
	}
	return page, nil
}
