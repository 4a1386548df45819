// Package adminservice is promo-admin's business logic: creating, changing, stopping
// and deleting promotions so that their MySQL row and their Redis hash never
// disagree after any single failure (see journal.go and the package store doc).
package adminservice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
)

// Service is what merchandisers and viewers can do.
type Service interface {
	Create(ctx context.Context, s promo.Spec) (promo.Promotion, error)
	Get(ctx context.Context, id store.ID) (promo.Promotion, error)
	List(ctx context.Context, q ListQuery) (ListPage, error)
	Patch(ctx context.Context, id store.ID, p Patch) (promo.Promotion, error)
	Stop(ctx context.Context, id store.ID, reason string) (promo.Promotion, error)
	Delete(ctx context.Context, id store.ID) error
	History(ctx context.Context, id store.ID) (History, error)
	Timeline(ctx context.Context, id store.ID) (Timeline, error)
}

// History is a promotion's audit trail: every change that landed, newest first
// (at most store.MaxHistory), with who made it and the promotion before and after.
type History struct {
	Entries []store.AuditEntry `json:"entries"`
}

// ListQuery asks for a page of promotions, newest first.
type ListQuery struct {
	State  string // one of the contract's states, or "" for all but DELETED
	Limit  int    // 1..500
	Cursor string // NextCursor of the previous page
}

// ListPage is one page; NextCursor is empty on the last.
type ListPage struct {
	Items      []promo.Promotion `json:"items"`
	NextCursor string            `json:"nextCursor,omitempty"`
}

// Patch is a partial change of a live promotion; nil fields stay as they are.
type Patch struct {
	Total       *int64
	PerPinLimit *int64
	PerIPLimit  *int64
	RateLimit   *promo.RateLimit
	EndAt       *time.Time
	// Buckets is fixed at create: a patch may name it only with the promotion's own count.
	Buckets *int
	// Channels, when set, are the channels sold on from now (promo.EveryChannel: every one).
	Channels *promo.Channels
}

func (p Patch) empty() bool {
	return p.Total == nil && p.PerPinLimit == nil && p.PerIPLimit == nil && p.RateLimit == nil && p.EndAt == nil && p.Channels == nil
}

// Sentinel errors; the transport maps each to its status in one place.
var (
	ErrNotFound = errors.New("no such promotion")
	ErrExists   = errors.New("the promotion already exists")
	ErrBusy     = errors.New("another change of this promotion is in progress; retry in a few seconds")
	ErrStopped  = errors.New("the promotion is stopped")
	// ErrArchived is ErrStopped of a promotion archived (recovery archive): its sale
	// ended long ago and its flow rows are in the archive.
	ErrArchived     = fmt.Errorf("%w: archived, its sale ended long ago; create another promotion", ErrStopped)
	ErrBelowGranted = errors.New("total below what is already granted")
	ErrUnavailable  = errors.New("a dependency is unavailable")
	// ErrEnvelopeFixed refuses a change of an envelope pool's size or budget.
	ErrEnvelopeFixed = errors.New("an envelope pool's size and budget are fixed once created")
)

// EnvelopeFixedError is ErrEnvelopeFixed naming the field a PATCH of a pool may
// not change, with the pool's value of it.
type EnvelopeFixedError struct {
	Field string
	Have  int64 // the pool's
	Want  int64 // the patch's
}

func (e *EnvelopeFixedError) Error() string {
	return fmt.Sprintf("%s is fixed for an envelope pool: its %d envelopes were split from its budget at create, so %s cannot become %d; "+
		"a pool may change only endAt, perPinLimit, perIpLimit and rateLimit (create another promotion for another pool)",
		e.Field, e.Have, e.Field, e.Want)
}

func (e *EnvelopeFixedError) Is(target error) bool { return target == ErrEnvelopeFixed }

// invalid is invalid input (httpx.FieldError): field names the offending JSON
// field, path or query parameter. Nothing was changed.
func invalid(field, format string, args ...any) error {
	return &httpx.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// BelowGrantedError is ErrBelowGranted with the numbers. For a promotion in
// buckets (Buckets > 1) it names the bucket whose grants exceed its share of the
// new total, and where it lives.
type BelowGrantedError struct {
	Total, Granted int64
	Buckets        int
	Bucket, Shard  int
	Share          int64
}

func (e *BelowGrantedError) Error() string {
	if e.Buckets > 1 {
		return fmt.Sprintf("total %d is below what bucket %d of %d (redis shard %d) has already granted: %d, above its share %d of the new total",
			e.Total, e.Bucket, e.Buckets, e.Shard, e.Granted, e.Share)
	}
	return fmt.Sprintf("total %d is below the %d already granted", e.Total, e.Granted)
}

func (e *BelowGrantedError) Is(target error) bool { return target == ErrBelowGranted }

// UnavailableError is ErrUnavailable naming the dependency ("mysql", "redis shard 3")
// and what became of the change.
type UnavailableError struct {
	Dependency string
	Msg        string
	Err        error
}

func (e *UnavailableError) Error() string {
	if e.Err != nil {
		return e.Dependency + ": " + e.Msg + ": " + e.Err.Error()
	}
	return e.Dependency + ": " + e.Msg
}

func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

func (e *UnavailableError) Unwrap() error { return e.Err }
