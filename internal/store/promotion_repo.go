package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/flashsale/platform/internal/promo"
)

// promotionRow is the promotion table as sqlx scans it.
type promotionRow struct {
	PromoID           string         `db:"promo_id"`
	PromoType         int            `db:"promo_type"`
	Title             string         `db:"title"`
	Total             int64          `db:"total"`
	PerPinLimit       int64          `db:"per_pin_limit"`
	PerIPLimit        int64          `db:"per_ip_limit"`
	MaxPerGrab        int64          `db:"max_per_grab"`
	RateLimit         int64          `db:"rate_limit"`
	RateWindowSeconds int64          `db:"rate_window_seconds"`
	Buckets           int            `db:"buckets"`
	StartAt           time.Time      `db:"start_at"`
	EndAt             time.Time      `db:"end_at"`
	State             string         `db:"state"`
	Version           int64          `db:"version"`
	Remaining         int64          `db:"remaining"`
	Pending           sql.NullString `db:"pending"`
	PendingVersion    sql.NullInt64  `db:"pending_version"`
	PendingAt         sql.NullTime   `db:"pending_at"`
	CreatedAt         time.Time      `db:"created_at"`
	UpdatedAt         time.Time      `db:"updated_at"`
	EnvelopeAmount    sql.NullInt64  `db:"envelope_amount"`
	EnvelopeMin       sql.NullInt64  `db:"envelope_min"`
	ArchivedAt        sql.NullTime   `db:"archived_at"`
	// Channels are the channels sold on, names joined by commas (a SET; '' = every).
	Channels string `db:"channels"`
	// RemainingAmount is a pool's amount left by the record (remainingAmountColumn),
	// selected by the reads that do not lock the row.
	RemainingAmount sql.NullInt64 `db:"remaining_amount"`
}

const promotionColumns = `promo_id, promo_type, title, total, per_pin_limit, per_ip_limit,
 max_per_grab, rate_limit, rate_window_seconds, buckets, start_at, end_at, state, version, remaining,
 pending, pending_version, pending_at, created_at, updated_at, envelope_amount, envelope_min, archived_at, channels`

func (r promotionRow) promotion() (Promotion, error) {
	channels, err := promo.ParseChannelsColumn(r.Channels)
	if err != nil {
		return Promotion{}, fmt.Errorf("channels of %s/%d: %w", r.PromoID, r.PromoType, err)
	}
	p := Promotion{
		Spec: promo.Spec{
			PromoID:     r.PromoID,
			Type:        r.PromoType,
			Title:       r.Title,
			Total:       r.Total,
			PerPinLimit: r.PerPinLimit,
			PerIPLimit:  r.PerIPLimit,
			MaxPerGrab:  r.MaxPerGrab,
			Buckets:     promo.BucketsOf(r.Buckets),
			StartAt:     r.StartAt.UTC(),
			EndAt:       r.EndAt.UTC(),
			Channels:    channels,
		},
		State:     promo.State(r.State),
		Version:   r.Version,
		Remaining: r.Remaining,
		CreatedAt: r.CreatedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC(),
		Archived:  r.ArchivedAt.Valid,
	}
	if r.RateLimit > 0 {
		p.Spec.RateLimit = &promo.RateLimit{Limit: r.RateLimit, WindowSeconds: r.RateWindowSeconds}
	}
	if r.EnvelopeAmount.Valid {
		p.Spec.Envelope = &promo.Envelope{Amount: r.EnvelopeAmount.Int64, MinAmount: r.EnvelopeMin.Int64}
		p.RemainingAmount = r.RemainingAmount.Int64
	}
	if r.Pending.Valid {
		var ch Change
		if err := json.Unmarshal([]byte(r.Pending.String), &ch); err != nil {
			return Promotion{}, fmt.Errorf("pending change of %s/%d: %w", r.PromoID, r.PromoType, err)
		}
		ch.Version = r.PendingVersion.Int64
		ch.At = r.PendingAt.Time.UTC()
		p.Pending = &ch
	}
	return p, nil
}

func rowOf(p Promotion) (promotionRow, error) {
	s := normalize(p.Spec)
	r := promotionRow{
		PromoID: s.PromoID, PromoType: s.Type, Title: s.Title, Total: s.Total,
		PerPinLimit: s.PerPinLimit, PerIPLimit: s.PerIPLimit, MaxPerGrab: s.MaxPerGrab,
		Buckets: max(s.Buckets, 1), StartAt: s.StartAt, EndAt: s.EndAt, State: string(p.State), Version: p.Version,
		Remaining: p.Remaining, CreatedAt: ms(p.CreatedAt), UpdatedAt: ms(p.UpdatedAt),
		Channels: s.Channels.String(),
	}
	if s.RateLimit != nil {
		r.RateLimit, r.RateWindowSeconds = s.RateLimit.Limit, s.RateLimit.WindowSeconds
	}
	if e := s.Envelope; e != nil {
		r.EnvelopeAmount = sql.NullInt64{Int64: e.Amount, Valid: true}
		r.EnvelopeMin = sql.NullInt64{Int64: e.MinAmount, Valid: true}
	}
	if p.Pending != nil {
		b, err := json.Marshal(p.Pending)
		if err != nil {
			return r, fmt.Errorf("encode pending change: %w", err)
		}
		r.Pending = sql.NullString{String: string(b), Valid: true}
		r.PendingVersion = sql.NullInt64{Int64: p.Pending.Version, Valid: true}
		r.PendingAt = sql.NullTime{Time: ms(p.Pending.At), Valid: true}
	}
	return r, nil
}

// Promotions is the promotion table with its journal (the pending columns), the
// audit trail its promotions write (promotion_audit) and the envelope splits its
// creates write (promotion_envelope): what promo-admin reads and writes.
type Promotions struct {
	db *sqlx.DB
}

// Insert adds a new row (a create: NewPromotion). ErrExists if the key is taken,
// whatever the other row's state or version. An envelope pool's row goes in with
// its parts: InsertPool.
func (s *Promotions) Insert(ctx context.Context, p Promotion) error {
	return s.InsertPool(ctx, p, nil)
}

// InsertPool is Insert of an envelope pool's row with its parts (amounts in the
// order they are handed out; parts[i] is envelope idx i), written in the row's
// transaction: the record never holds a pool without its split, nor parts without
// their pool. parts must be empty for a promotion that is no pool.
func (s *Promotions) InsertPool(ctx context.Context, p Promotion, parts []int64) error {
	if err := checkParts(p.Spec, parts); err != nil {
		return fmt.Errorf("store: insert %s: %w", p.ID(), err)
	}
	r, err := rowOf(p)
	if err != nil {
		return fmt.Errorf("store: insert %s: %w", p.ID(), err)
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: insert %s: %w", p.ID(), err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op once committed
	_, err = tx.NamedExecContext(ctx, `INSERT INTO promotion (`+promotionColumns+`) VALUES (
 :promo_id, :promo_type, :title, :total, :per_pin_limit, :per_ip_limit, :max_per_grab,
 :rate_limit, :rate_window_seconds, :buckets, :start_at, :end_at, :state, :version, :remaining,
 :pending, :pending_version, :pending_at, :created_at, :updated_at, :envelope_amount, :envelope_min, :archived_at, :channels)`, r)
	switch {
	case isDuplicate(err):
		return fmt.Errorf("store: insert %s: %w", p.ID(), ErrExists)
	case err != nil:
		return fmt.Errorf("store: insert %s: %w", p.ID(), err)
	}
	if err := insertParts(ctx, tx, p.ID(), parts); err != nil {
		return fmt.Errorf("store: insert %s: %w", p.ID(), err)
	}
	if err := commit(ctx, tx); err != nil {
		return fmt.Errorf("store: insert %s: commit: %w", p.ID(), err)
	}
	return nil
}

// Get returns the committed row of id, whatever its state (DELETED included).
// A row whose create is still pending is ErrNotFound.
func (s *Promotions) Get(ctx context.Context, id ID) (Promotion, error) {
	return s.one(ctx, "get", id, " AND version > 0")
}

// Row returns the row of id as stored, a pending create (version 0) included. It
// is for the resolver of pending changes; readers use Get.
func (s *Promotions) Row(ctx context.Context, id ID) (Promotion, error) {
	return s.one(ctx, "row", id, "")
}

func (s *Promotions) one(ctx context.Context, op string, id ID, cond string) (Promotion, error) {
	var r promotionRow
	err := s.db.GetContext(ctx, &r, `SELECT `+promotionColumns+`, `+remainingAmountColumn+` FROM promotion
 WHERE promo_id = ? AND promo_type = ?`+cond, id.PromoID, id.Type)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	var p Promotion
	if err == nil {
		p, err = r.promotion()
	}
	if err != nil {
		return Promotion{}, fmt.Errorf("store: %s %s: %w", op, id, err)
	}
	return p, nil
}

// Update locks the row of id (committed or not), lets fn change it and writes it
// back, in one transaction. An error from fn rolls back and is returned wrapped.
func (s *Promotions) Update(ctx context.Context, id ID, fn func(p *Promotion) error) (Promotion, error) {
	return s.update(ctx, id, func(_ *sqlx.Tx, p *Promotion) error { return fn(p) })
}

// update is Update with fn also given the transaction, to write beside the row.
func (s *Promotions) update(ctx context.Context, id ID, fn func(tx *sqlx.Tx, p *Promotion) error) (Promotion, error) {
	var out Promotion
	err := s.withRow(ctx, id, func(tx *sqlx.Tx, p *Promotion) error {
		if err := fn(tx, p); err != nil {
			return err
		}
		if p.ID() != id {
			return fmt.Errorf("the key of a row cannot change (to %s)", p.ID())
		}
		r, err := rowOf(*p)
		if err != nil {
			return err
		}
		if _, err := tx.NamedExecContext(ctx, `UPDATE promotion SET
 title = :title, total = :total, per_pin_limit = :per_pin_limit, per_ip_limit = :per_ip_limit,
 max_per_grab = :max_per_grab, rate_limit = :rate_limit, rate_window_seconds = :rate_window_seconds,
 start_at = :start_at, end_at = :end_at, state = :state, version = :version, remaining = :remaining,
 channels = :channels,
 pending = :pending, pending_version = :pending_version, pending_at = :pending_at,
 updated_at = :updated_at
 WHERE promo_id = :promo_id AND promo_type = :promo_type`, r); err != nil {
			return err
		}
		out = *p
		return nil
	})
	if err != nil {
		return Promotion{}, fmt.Errorf("store: update %s: %w", id, err)
	}
	return out, nil
}

// Promote commits the pending change of that version (journal step 3).
// ErrNoPending if the row has no pending change of that version (already resolved).
// The change's audit row is written in the same transaction (audit.go).
func (s *Promotions) Promote(ctx context.Context, id ID, version int64, at time.Time) (Promotion, error) {
	return s.update(ctx, id, func(tx *sqlx.Tx, p *Promotion) error {
		before := *p
		if err := p.Promote(version, at); err != nil {
			return err
		}
		return writeAudit(ctx, tx, before, *p, at)
	})
}

// Discard drops the pending change of that version; the row of a create that never
// happened (version 0) goes with it. ErrNoPending if there is no such change.
func (s *Promotions) Discard(ctx context.Context, id ID, version int64) error {
	err := s.withRow(ctx, id, func(tx *sqlx.Tx, p *Promotion) error {
		if err := p.Discard(version); err != nil {
			return err
		}
		if !p.Committed() {
			if _, err := tx.ExecContext(ctx, `DELETE FROM promotion WHERE promo_id = ? AND promo_type = ? AND version = 0`, id.PromoID, id.Type); err != nil {
				return err
			}
			// A pool's split goes with the create that never happened.
			return deleteParts(ctx, tx, id)
		}
		_, err := tx.ExecContext(ctx, `UPDATE promotion SET pending = NULL, pending_version = NULL, pending_at = NULL
 WHERE promo_id = ? AND promo_type = ?`, id.PromoID, id.Type)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: discard %s version %d: %w", id, version, err)
	}
	return nil
}

// withRow runs fn on the row of id, locked FOR UPDATE, in one transaction that
// commits when fn returns nil.
func (s *Promotions) withRow(ctx context.Context, id ID, fn func(tx *sqlx.Tx, p *Promotion) error) (err error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var r promotionRow
	err = tx.GetContext(ctx, &r, `SELECT `+promotionColumns+` FROM promotion
 WHERE promo_id = ? AND promo_type = ? FOR UPDATE`, id.PromoID, id.Type)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	p, err := r.promotion()
	if err != nil {
		return err
	}
	if err = fn(tx, &p); err != nil {
		return err
	}
	if err = commit(ctx, tx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Pending lists the rows whose pending change was recorded at or before `before`,
// oldest first, at most limit of them.
func (s *Promotions) Pending(ctx context.Context, before time.Time, limit int) ([]ID, error) {
	var rows []struct {
		PromoID string `db:"promo_id"`
		Type    int    `db:"promo_type"`
	}
	err := s.db.SelectContext(ctx, &rows, `SELECT promo_id, promo_type FROM promotion
 WHERE pending_at IS NOT NULL AND pending_at <= ? ORDER BY pending_at LIMIT ?`, ms(before), limit)
	if err != nil {
		return nil, fmt.Errorf("store: list pending: %w", err)
	}
	ids := make([]ID, len(rows))
	for i, r := range rows {
		ids[i] = ID{r.PromoID, r.Type}
	}
	return ids, nil
}
