package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// An approval applies its proposal in steps, so that two approvers never both
// apply one and a crash leaves a status that tells the truth (docs/CONTRACT.md,
// "Approval"): Claim (PENDING → APPLYING, one approver wins), the change through
// promo-admin's journal, then Finish (APPLYING → APPROVED or FAILED), or Release
// (back to PENDING) when the change was refused before anything was recorded.
// Each step names the claim it continues by its instant (decided_at), so a step of
// a claim taken over by Reclaim changes nothing.

// The audit actions of proposals, beside a promotion's changes in promotion_audit.
const (
	AuditProposed = "PROPOSED"
	AuditApproved = "APPROVED"
	AuditRejected = "REJECTED"
	AuditFailed   = "FAILED"
)

// proposalAudit is a proposal as its audit entries show it (the entry's after).
type proposalAudit struct {
	Proposal int64           `json:"proposal"`
	Kind     string          `json:"kind"`
	Status   string          `json:"status"`
	Change   json.RawMessage `json:"change"`
	Reason   string          `json:"reason,omitempty"`
}

// auditProposal writes the audit entry of a step of p by who, in tx.
func auditProposal(ctx context.Context, tx *sqlx.Tx, p Proposal, action string, who Actor, at time.Time) error {
	change := json.RawMessage(p.Body)
	if !json.Valid(change) {
		change = json.RawMessage("null")
	}
	after, err := json.Marshal(proposalAudit{Proposal: p.ID, Kind: p.Kind, Status: p.Status, Change: change, Reason: p.Reason})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO promotion_audit
 (promo_id, promo_type, at, actor, role, action, before_json, after_json) VALUES (?, ?, ?, ?, ?, ?, NULL, ?)`,
		p.PromoID, p.Type, ms(at), who.Name, who.Role, action, string(after)); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// move runs fn on proposal id, locked, in one transaction, when it has status from
// (and, claimedAt set, was claimed at that instant): ErrProposalNotFound or
// ErrProposalDecided otherwise.
func (q *Proposals) move(ctx context.Context, id int64, from string, claimedAt *time.Time, fn func(tx *sqlx.Tx, p *Proposal) error) error {
	return q.moveAfter(ctx, id, from, claimedAt, nil, fn)
}

// moveAfter is move with first, when set, run in the transaction before the
// proposal's row is locked: locks taken there come first, in the journal's order.
func (q *Proposals) moveAfter(ctx context.Context, id int64, from string, claimedAt *time.Time,
	first func(tx *sqlx.Tx) error, fn func(tx *sqlx.Tx, p *Proposal) error) error {
	tx, err := q.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: proposal %d: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it changes nothing
	if first != nil {
		if err := first(tx); err != nil {
			return fmt.Errorf("store: proposal %d: %w", id, err)
		}
	}
	var r proposalRow
	err = tx.GetContext(ctx, &r, `SELECT `+proposalCols+` FROM proposals WHERE id = ? FOR UPDATE`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: proposal %d: %w", id, ErrProposalNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: proposal %d: %w", id, err)
	}
	p := r.proposal()
	if p.Status != from || (claimedAt != nil && (p.DecidedAt == nil || !p.DecidedAt.Equal(ms(*claimedAt)))) {
		return fmt.Errorf("store: proposal %d is %s: %w", id, p.Status, ErrProposalDecided)
	}
	if err := fn(tx, &p); err != nil {
		return fmt.Errorf("store: proposal %d: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: proposal %d: %w", id, err)
	}
	return nil
}

// claim sets the proposal APPLYING under who's name, stamped by MySQL's clock:
// every replica ages a claim by that one clock (Reclaim), never by its own.
func claim(ctx context.Context, tx *sqlx.Tx, p *Proposal, who Actor) error {
	if _, err := tx.ExecContext(ctx, `UPDATE proposals SET status = ?, decided_by = ?, decided_role = ?, decided_at = UTC_TIMESTAMP(3), reason = ''
 WHERE id = ?`, ProposalApplying, who.Name, who.Role, p.ID); err != nil {
		return err
	}
	var at time.Time
	if err := tx.QueryRowxContext(ctx, `SELECT decided_at FROM proposals WHERE id = ?`, p.ID).Scan(&at); err != nil {
		return err
	}
	at = at.UTC()
	p.Status, p.DecidedBy, p.DecidedAt, p.Reason = ProposalApplying, &who, &at, ""
	return nil
}

// Claim makes who the one approver applying a PENDING proposal: APPLYING, claimed
// at MySQL's now (ErrProposalDecided when it is not PENDING). It returns the
// proposal claimed, DecidedAt naming the claim.
func (q *Proposals) Claim(ctx context.Context, id int64, who Actor) (Proposal, error) {
	var out Proposal
	err := q.move(ctx, id, ProposalPending, nil, func(tx *sqlx.Tx, p *Proposal) error {
		err := claim(ctx, tx, p, who)
		out = *p
		return err
	})
	return out, err
}

// Errors of a takeover and of a claimed change.
var (
	// ErrClaimYoung is a takeover of a claim not yet olderThan, by MySQL's clock.
	ErrClaimYoung = errors.New("the claim is too recent to take over")
	// ErrClaimTouched is a takeover of a claim whose promotion shows a change
	// since the proposal (pending or recorded): perhaps the claimed one.
	ErrClaimTouched = errors.New("the promotion changed since the proposal was made")
	// ErrClaimMoved is a change proposed under a claim that is no longer held
	// (taken over, released or finished): nothing is recorded (UpdateClaimed).
	ErrClaimMoved = errors.New("the approval's claim is no longer held")
)

// Reclaim takes over for who a claim made at claimedAt that its approver left
// APPLYING, in one transaction: only once the claim is older than olderThan by
// MySQL's clock (ErrClaimYoung otherwise) and the promotion shows nothing of the
// change (ErrClaimTouched otherwise: a PATCH's row still at base_version with no
// change pending, a CREATE's key with no row); ErrProposalDecided when the
// proposal moved on. The promotion's row (or its key's gap) is share-locked first,
// so a change the old claimer's journal records is either seen here or refused
// there (UpdateClaimed), never both.
func (q *Proposals) Reclaim(ctx context.Context, id int64, claimedAt time.Time, who Actor, olderThan time.Duration) (Proposal, error) {
	p0, err := q.Get(ctx, id) // its key, which never changes
	if err != nil {
		return Proposal{}, err
	}
	var touched bool
	first := func(tx *sqlx.Tx) error {
		var err error
		touched, err = promotionTouched(ctx, tx, p0)
		return err
	}
	var out Proposal
	err = q.moveAfter(ctx, id, ProposalApplying, &claimedAt, first, func(tx *sqlx.Tx, p *Proposal) error {
		var aged bool
		if err := tx.QueryRowxContext(ctx, `SELECT decided_at < UTC_TIMESTAMP(3) - INTERVAL ? MICROSECOND FROM proposals WHERE id = ?`,
			olderThan.Microseconds(), id).Scan(&aged); err != nil {
			return err
		}
		switch {
		case !aged:
			return ErrClaimYoung
		case touched:
			return ErrClaimTouched
		}
		err := claim(ctx, tx, p, who)
		out = *p
		return err
	})
	return out, err
}

// promotionTouched reads, share-locked, whether p's promotion shows a change since
// p was proposed: a row for a CREATE; a version other than base_version or a
// change pending for a PATCH.
func promotionTouched(ctx context.Context, tx *sqlx.Tx, p Proposal) (bool, error) {
	var version int64
	var idle bool
	err := tx.QueryRowxContext(ctx, `SELECT version, pending IS NULL FROM promotion
 WHERE promo_id = ? AND promo_type = ? LOCK IN SHARE MODE`, p.PromoID, p.Type).Scan(&version, &idle)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return p.Kind != ProposeCreate, nil
	case err != nil:
		return false, err
	}
	return p.Kind != ProposePatch || version != p.BaseVersion || !idle, nil
}

// Holds tells whether proposal id is still APPLYING under the claim made at
// claimedAt: a step that cannot check the claim in its own transaction checks it
// right after (an approved create, whose insert a takeover's Reclaim sees).
func (q *Proposals) Holds(ctx context.Context, id int64, claimedAt time.Time) (bool, error) {
	var n int
	if err := q.db.GetContext(ctx, &n, `SELECT COUNT(*) FROM proposals WHERE id = ? AND status = ? AND decided_at = ?`,
		id, ProposalApplying, ms(claimedAt)); err != nil {
		return false, fmt.Errorf("store: proposal %d: %w", id, err)
	}
	return n == 1, nil
}

// ClaimRef names an approval's claim of a proposal: its id and the claim's instant.
type ClaimRef struct {
	Proposal int64
	At       time.Time
}

// UpdateClaimed is Update for a change an approval applies under claim c: in the
// same transaction, after the row's lock, the proposal must still be APPLYING
// under that claim (ErrClaimMoved otherwise, nothing written), and stays locked to
// the commit, so a takeover (Reclaim) either sees the change or the change is
// refused.
func (s *Promotions) UpdateClaimed(ctx context.Context, id ID, c ClaimRef, fn func(p *Promotion) error) (Promotion, error) {
	return s.update(ctx, id, func(tx *sqlx.Tx, p *Promotion) error {
		var one int
		err := tx.QueryRowxContext(ctx, `SELECT 1 FROM proposals WHERE id = ? AND status = ? AND decided_at = ? FOR UPDATE`,
			c.Proposal, ProposalApplying, ms(c.At)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("proposal %d: %w", c.Proposal, ErrClaimMoved)
		}
		if err != nil {
			return err
		}
		return fn(p)
	})
}

// Release puts a proposal claimed at claimedAt back to PENDING: its change was
// refused before anything of it was recorded (another change in progress, MySQL
// down), so another approval may try again.
func (q *Proposals) Release(ctx context.Context, id int64, claimedAt time.Time) error {
	return q.move(ctx, id, ProposalApplying, &claimedAt, func(tx *sqlx.Tx, _ *Proposal) error {
		_, err := tx.ExecContext(ctx, `UPDATE proposals SET status = ?, decided_by = '', decided_role = '', decided_at = NULL, reason = ''
 WHERE id = ?`, ProposalPending, id)
		return err
	})
}

// MaxProposalReason is the longest reason the record keeps (proposals.reason).
const MaxProposalReason = 500

// Finish ends a claim made at claimedAt: APPROVED (its change applied) or FAILED
// with the reason (refused, nothing applied), decided at at, with the audit entry
// under the claimer's name. It returns the proposal as it now stands.
func (q *Proposals) Finish(ctx context.Context, id int64, claimedAt time.Time, status, reason string, at time.Time) (Proposal, error) {
	if status != ProposalApproved && status != ProposalFailed {
		return Proposal{}, fmt.Errorf("store: finish proposal %d: status %q", id, status)
	}
	if r := []rune(reason); len(r) > MaxProposalReason {
		reason = string(r[:MaxProposalReason-1]) + "…"
	}
	var out Proposal
	err := q.move(ctx, id, ProposalApplying, &claimedAt, func(tx *sqlx.Tx, p *Proposal) error {
		at := ms(at)
		if _, err := tx.ExecContext(ctx, `UPDATE proposals SET status = ?, decided_at = ?, reason = ? WHERE id = ?`,
			status, at, reason, id); err != nil {
			return err
		}
		p.Status, p.DecidedAt, p.Reason = status, &at, reason
		out = *p
		action := map[string]string{ProposalApproved: AuditApproved, ProposalFailed: AuditFailed}[status]
		return auditProposal(ctx, tx, *p, action, *p.DecidedBy, at)
	})
	return out, err
}
