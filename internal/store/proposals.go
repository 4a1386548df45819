package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// What a proposal asks for (proposals.kind).
const (
	ProposeCreate = "CREATE"
	ProposePatch  = "PATCH"
)

// Where a proposal stands (proposals.status): PENDING, then REJECTED, or
// APPLYING (claimed by one approver, being applied) and then APPROVED or FAILED;
// APPLYING goes back to PENDING when its change was refused before anything was
// recorded (Release). Migration 0015's comment, which names only PENDING,
// APPROVED and REJECTED and a patch of "total, limits or window", predates
// APPLYING, FAILED and channels: this list, and the guarded fields below, are the
// truth (an applied migration is never edited).
const (
	ProposalPending  = "PENDING"
	ProposalApplying = "APPLYING"
	ProposalApproved = "APPROVED"
	ProposalRejected = "REJECTED"
	ProposalFailed   = "FAILED"
)

// ValidProposalStatus tells whether s is one of the statuses above.
func ValidProposalStatus(s string) bool {
	switch s {
	case ProposalPending, ProposalApplying, ProposalApproved, ProposalRejected, ProposalFailed:
		return true
	}
	return false
}

// Proposal queue limits.
const (
	DefaultProposalPage = 20
	MaxProposalPage     = 100
)

// Errors of the proposal queue.
var (
	// ErrProposalsFull is a proposal refused: the promotion, or the queue in all,
	// holds as many pending proposals as it may.
	ErrProposalsFull = errors.New("too many pending proposals")
	// ErrProposalNotFound is a proposal id the record does not hold.
	ErrProposalNotFound = errors.New("proposal not found")
	// ErrProposalDecided is a decision on a proposal already approved or rejected
	// (or claimed by another approver: APPLYING).
	ErrProposalDecided = errors.New("proposal already decided")
)

// Proposals is the approval queue (proposals): changes of a promotion recorded,
// not applied, until an approver decides them: a create (CREATE), or a patch
// (PATCH) of what approval guards: total, perPinLimit, perIpLimit, rateLimit,
// endAt or channels.
type Proposals struct {
	db *sqlx.DB
}

// NewProposals is the approval queue of the record db holds (Store.DB).
func NewProposals(db *sqlx.DB) *Proposals { return &Proposals{db: db} }

// Proposal is one recorded proposal.
type Proposal struct {
	ID          int64      `json:"id"`
	PromoID     string     `json:"promoId"`
	Type        int        `json:"type"`
	Kind        string     `json:"kind"`
	BaseVersion int64      `json:"baseVersion"`
	Body        string     `json:"body"`
	Proposer    Actor      `json:"proposer"`
	ProposedAt  time.Time  `json:"proposedAt"`
	Status      string     `json:"status"`
	DecidedBy   *Actor     `json:"decidedBy,omitempty"`
	DecidedAt   *time.Time `json:"decidedAt,omitempty"`
	Reason      string     `json:"reason,omitempty"`
}

// Bounds caps the pending proposals per promotion and in all.
type Bounds struct {
	PerPromotion, Total int
}

// Propose records p as PENDING when the bounds leave room (ErrProposalsFull
// otherwise) and returns its id, with its PROPOSED audit entry in the same
// transaction. Proposers take turns under a named lock, so two at once cannot
// both take the last place. A proposal being applied (APPLYING) holds its place.
func (q *Proposals) Propose(ctx context.Context, p Proposal, b Bounds) (int64, error) {
	conn, err := q.db.Connx(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: propose %s: %w", p.PromoID, err)
	}
	defer conn.Close()
	var got *int
	if err := conn.QueryRowxContext(ctx, "SELECT GET_LOCK(CONCAT('flashsale.proposals.', DATABASE()), 10)").Scan(&got); err != nil || got == nil || *got != 1 {
		return 0, fmt.Errorf("store: propose %s: lock not granted: %v", p.PromoID, err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(CONCAT('flashsale.proposals.', DATABASE()))") //nolint:errcheck // closing the connection releases it too
	var total, mine int
	if err := conn.QueryRowxContext(ctx, `SELECT COUNT(*), COALESCE(SUM(promo_id = ? AND type = ?), 0)
 FROM proposals WHERE status IN (?, ?)`, p.PromoID, p.Type, ProposalPending, ProposalApplying).Scan(&total, &mine); err != nil {
		return 0, fmt.Errorf("store: propose %s: %w", p.PromoID, err)
	}
	if total >= b.Total || mine >= b.PerPromotion {
		return 0, fmt.Errorf("store: propose %s: %w", p.PromoID, ErrProposalsFull)
	}
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: propose %s: %w", p.PromoID, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it changes nothing
	r, err := tx.ExecContext(ctx, `INSERT INTO proposals
 (promo_id, type, kind, base_version, body_json, proposer, proposer_role, proposed_at, status)
 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, p.PromoID, p.Type, p.Kind, p.BaseVersion, p.Body,
		p.Proposer.Name, p.Proposer.Role, ms(p.ProposedAt), ProposalPending)
	if err != nil {
		return 0, fmt.Errorf("store: propose %s: %w", p.PromoID, err)
	}
	if p.ID, err = r.LastInsertId(); err != nil {
		return 0, fmt.Errorf("store: propose %s: %w", p.PromoID, err)
	}
	p.Status = ProposalPending
	if err := auditProposal(ctx, tx, p, AuditProposed, p.Proposer, p.ProposedAt); err != nil {
		return 0, fmt.Errorf("store: propose %s: %w", p.PromoID, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: propose %s: %w", p.PromoID, err)
	}
	return p.ID, nil
}

type proposalRow struct {
	ID          int64        `db:"id"`
	PromoID     string       `db:"promo_id"`
	Type        int          `db:"type"`
	Kind        string       `db:"kind"`
	BaseVersion int64        `db:"base_version"`
	Body        string       `db:"body_json"`
	Proposer    string       `db:"proposer"`
	Role        string       `db:"proposer_role"`
	ProposedAt  time.Time    `db:"proposed_at"`
	Status      string       `db:"status"`
	DecidedBy   string       `db:"decided_by"`
	DecidedRole string       `db:"decided_role"`
	DecidedAt   sql.NullTime `db:"decided_at"`
	Reason      string       `db:"reason"`
}

const proposalCols = `id, promo_id, type, kind, base_version, body_json, proposer, proposer_role, proposed_at,
 status, decided_by, decided_role, decided_at, reason`

func (r proposalRow) proposal() Proposal {
	p := Proposal{ID: r.ID, PromoID: r.PromoID, Type: r.Type, Kind: r.Kind, BaseVersion: r.BaseVersion, Body: r.Body,
		Proposer: Actor{Name: r.Proposer, Role: r.Role}, ProposedAt: r.ProposedAt.UTC(), Status: r.Status, Reason: r.Reason}
	if r.DecidedAt.Valid {
		at := r.DecidedAt.Time.UTC()
		p.DecidedAt, p.DecidedBy = &at, &Actor{Name: r.DecidedBy, Role: r.DecidedRole}
	}
	return p
}

// Get reads proposal id (ErrProposalNotFound when the record has none).
func (q *Proposals) Get(ctx context.Context, id int64) (Proposal, error) {
	var r proposalRow
	err := q.db.GetContext(ctx, &r, `SELECT `+proposalCols+` FROM proposals WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Proposal{}, fmt.Errorf("store: proposal %d: %w", id, ErrProposalNotFound)
	}
	if err != nil {
		return Proposal{}, fmt.Errorf("store: proposal %d: %w", id, err)
	}
	return r.proposal(), nil
}

// Reject decides a PENDING proposal REJECTED under who's name, with the reason
// and its audit entry; one decided already, or being applied, is left as it is
// (ErrProposalDecided). An approval never decides without applying: it goes
// through Claim and Finish (proposals_apply.go).
func (q *Proposals) Reject(ctx context.Context, id int64, who Actor, reason string, at time.Time) error {
	return q.move(ctx, id, ProposalPending, nil, func(tx *sqlx.Tx, p *Proposal) error {
		if _, err := tx.ExecContext(ctx, `UPDATE proposals SET status = ?, decided_by = ?, decided_role = ?, decided_at = ?, reason = ?
 WHERE id = ?`, ProposalRejected, who.Name, who.Role, ms(at), reason, id); err != nil {
			return err
		}
		p.Status, p.Reason = ProposalRejected, reason
		return auditProposal(ctx, tx, *p, AuditRejected, who, at)
	})
}

// ProposalPage is one page of the queue, newest first; NextCursor is "" on the last.
type ProposalPage struct {
	Proposals  []Proposal `json:"proposals"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// Page reads up to limit (1..MaxProposalPage) proposals of status ("" for every
// status), newest first, after cursor (the NextCursor of the page before).
func (q *Proposals) Page(ctx context.Context, status, cursor string, limit int) (ProposalPage, error) {
	p, err := newIDPage("proposals", cursor, limit, MaxProposalPage)
	if err != nil {
		return ProposalPage{}, err
	}
	// One query a case, each an index read backwards from the cursor: the primary
	// key for every status, proposals_status (status, id) for one (migration 0017).
	query, args := `SELECT `+proposalCols+` FROM proposals WHERE id < ? ORDER BY id DESC LIMIT ?`, []any{p.before, p.fetch()}
	if status != "" {
		query, args = `SELECT `+proposalCols+` FROM proposals
 WHERE status = ? AND id < ? ORDER BY id DESC LIMIT ?`, []any{status, p.before, p.fetch()}
	}
	var rows []proposalRow
	if err := q.db.SelectContext(ctx, &rows, query, args...); err != nil {
		return ProposalPage{}, fmt.Errorf("store: proposals: %w", err)
	}
	rows, next := trimPage(p, rows, func(r proposalRow) int64 { return r.ID })
	page := ProposalPage{Proposals: make([]Proposal, 0, len(rows)), NextCursor: next}
	for _, r := range rows {
		page.Proposals = append(page.Proposals, r.proposal())
	}
	return page, nil
}
