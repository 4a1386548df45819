package store

import (
	"fmt"
	"strconv"
	"time"

	"github.com/flashsale/platform/internal/promo"
)

// ID names one promotion: the primary key (promo_id, promo_type).
type ID struct {
	PromoID string
	Type    int
}

// Key is the promotion's Redis hash key.
func (id ID) Key() string { return promo.Key(id.PromoID, id.Type) }

func (id ID) String() string { return id.PromoID + "/" + strconv.Itoa(id.Type) }

// Op is the kind of a pending change.
type Op string

const (
	OpCreate Op = "CREATE"
	OpPatch  Op = "PATCH"
	OpStop   Op = "STOP"
	OpDelete Op = "DELETE"
)

// Change is a pending change: the whole spec and stored state the row will hold
// once it is promoted, at Version.
type Change struct {
	Op    Op          `json:"op"`
	Spec  promo.Spec  `json:"spec"`
	State promo.State `json:"state"`
	// Actor made the change: the audit row written when it lands names them.
	Actor   Actor     `json:"actor"`
	Version int64     `json:"-"` // pending_version
	At      time.Time `json:"-"` // pending_at
}

// Actor is who made a change: the name and role of the token they used.
type Actor struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// Promotion is one row of the promotion table.
type Promotion struct {
	Spec promo.Spec
	// State is the stored state: ACTIVE, STOPPED or DELETED.
	State promo.State
	// Version counts committed changes; 0 until the create is promoted.
	Version int64
	// Remaining is the record's remaining: total minus what the flow log has
	// granted. The flow sink moves it; a change of total moves it by the difference.
	Remaining int64
	// RemainingAmount is, for an envelope pool, the amount of its envelopes not
	// handed out by the record: Spec.Envelope.Amount less what its GRAB rows took
	// plus what its CANCEL rows gave back. List, Get and Row read it; the rows
	// Update and Promote return hold 0. The live figure is the hash's envLeft.
	RemainingAmount int64
	Pending         *Change
	CreatedAt       time.Time
	UpdatedAt       time.Time
	// Archived is set once recovery archive moved its flow rows to the archive
	// (Archive): the promotion is history, and a change of it is refused.
	Archived bool
}

// ID is the row's key.
func (p Promotion) ID() ID { return ID{p.Spec.PromoID, p.Spec.Type} }

// Committed reports whether the row's create has been promoted.
func (p Promotion) Committed() bool { return p.Version > 0 }

// NewPromotion is the version-0 row of a create: the spec, with the create itself
// pending at version 1.
func NewPromotion(spec promo.Spec, state promo.State, at time.Time) Promotion {
	spec = normalize(spec)
	at = ms(at)
	return Promotion{
		Spec:      spec,
		State:     state,
		Remaining: spec.Total,
		Pending:   &Change{Op: OpCreate, Spec: spec, State: state, Version: 1, At: at},
		CreatedAt: at,
		UpdatedAt: at,
	}
}

// Propose records a change of the committed row as pending at Version+1.
// It refuses (ErrBusy) while another change is pending.
func (p *Promotion) Propose(op Op, spec promo.Spec, state promo.State, at time.Time) error {
	if p.Pending != nil {
		return fmt.Errorf("%w (version %d, %s, since %s)", ErrBusy, p.Pending.Version, p.Pending.Op, p.Pending.At.Format(time.RFC3339Nano))
	}
	if !p.Committed() {
		return fmt.Errorf("propose %s: %w", op, ErrNotFound)
	}
	p.Pending = &Change{Op: op, Spec: normalize(spec), State: state, Version: p.Version + 1, At: ms(at)}
	return nil
}

// Promote makes the pending change of that version the committed row. Remaining
// moves by the change of total, so grants the flow sink has counted stay counted.
func (p *Promotion) Promote(version int64, at time.Time) error {
	if p.Pending == nil || p.Pending.Version != version {
		return fmt.Errorf("promote version %d: %w", version, ErrNoPending)
	}
	ch := p.Pending
	p.Remaining += ch.Spec.Total - p.Spec.Total
	p.Spec, p.State, p.Version = ch.Spec, ch.State, ch.Version
	p.Pending = nil
	p.UpdatedAt = ms(at)
	return nil
}

// Discard drops the pending change of that version; the committed row stays.
func (p *Promotion) Discard(version int64) error {
	if p.Pending == nil || p.Pending.Version != version {
		return fmt.Errorf("discard version %d: %w", version, ErrNoPending)
	}
	p.Pending = nil
	return nil
}

// ms is t in UTC at the columns' millisecond precision.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func normalize(s promo.Spec) promo.Spec {
	s.StartAt, s.EndAt = ms(s.StartAt), ms(s.EndAt)
	if s.RateLimit != nil {
		rl := *s.RateLimit
		s.RateLimit = &rl
	}
	return s
}
