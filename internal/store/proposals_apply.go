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
	tx, err := q.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: proposal %d: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it changes nothing
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

// claim sets the proposal APPLYING under who's name at at.
func claim(ctx context.Context, tx *sqlx.Tx, p *Proposal, who Actor, at time.Time) error {
	at = ms(at)
	if _, err := tx.ExecContext(ctx, `UPDATE proposals SET status = ?, decided_by = ?, decided_role = ?, decided_at = ?, reason = ''
 WHERE id = ?`, ProposalApplying, who.Name, who.Role, at, p.ID); err != nil {
		return err
	}
	p.Status, p.DecidedBy, p.DecidedAt, p.Reason = ProposalApplying, &who, &at, ""
	return nil
}

// Claim makes who the one approver applying a PENDING proposal: APPLYING, claimed
// at at (ErrProposalDecided when it is not PENDING). It returns the proposal claimed.
func (q *Proposals) Claim(ctx context.Context, id int64, who Actor, at time.Time) (Proposal, error) {
	var out Proposal
	err := q.move(ctx, id, ProposalPending, nil, func(tx *sqlx.Tx, p *Proposal) error {
		err := claim(ctx, tx, p, who, at)
		out = *p
		return err
	})
	return out, err
}

// Reclaim takes over a claim made at claimedAt (one its approver left APPLYING)
// for who at at; ErrProposalDecided when the proposal moved on meanwhile.
func (q *Proposals) Reclaim(ctx context.Context, id int64, claimedAt time.Time, who Actor, at time.Time) (Proposal, error) {
	var out Proposal
	err := q.move(ctx, id, ProposalApplying, &claimedAt, func(tx *sqlx.Tx, p *Proposal) error {
		err := claim(ctx, tx, p, who, at)
		out = *p
		return err
	})
	return out, err
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
