package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/flashsale/platform/internal/promo"
)

// AuditEntry is one change of a promotion that landed: who, when, what, and the
// promotion before and after it (before is null for a create).
//
// A step of an approval (PROPOSED, APPROVED, REJECTED, FAILED: proposals_apply.go)
// changes no promotion: its before and after are null, and Proposal says which
// proposal, its kind, status, change and reason.
type AuditEntry struct {
	At       time.Time       `json:"at"`
	Actor    Actor           `json:"actor"`
	Action   Op              `json:"action"`
	Before   json.RawMessage `json:"before"`
	After    json.RawMessage `json:"after"`
	Proposal json.RawMessage `json:"proposal,omitempty"`
}

// proposalStep tells the audit actions of an approval's steps.
func proposalStep(action string) bool {
	switch action {
	case AuditProposed, AuditApproved, AuditRejected, AuditFailed:
		return true
	}
	return false
}

// auditView is a promotion as its audit rows show it.
type auditView struct {
	State   promo.State `json:"state"`
	Version int64       `json:"version"`
	promo.Spec
}

// writeAudit records, in the transaction promoting it, the change that takes the
// row from before to after.
func writeAudit(ctx context.Context, tx *sqlx.Tx, before, after Promotion, at time.Time) error {
	ch := before.Pending
	var was any // NULL: a create has no before
	if before.Version > 0 {
		b, err := json.Marshal(auditView{before.State, before.Version, before.Spec})
		if err != nil {
			return err
		}
		was = string(b)
	}
	now, err := json.Marshal(auditView{after.State, after.Version, after.Spec})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO promotion_audit
 (promo_id, promo_type, at, actor, role, action, before_json, after_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		after.Spec.PromoID, after.Spec.Type, ms(at), ch.Actor.Name, ch.Actor.Role, string(ch.Op), was, string(now)); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// MaxHistory bounds one answer of History.
const MaxHistory = 200

// History is the promotion's audit trail, newest first, at most limit entries
// (1..MaxHistory).
func (s *Promotions) History(ctx context.Context, id ID, limit int) ([]AuditEntry, error) {
	limit = min(max(limit, 1), MaxHistory)
	var rows []struct {
		At     time.Time `db:"at"`
		Actor  string    `db:"actor"`
		Role   string    `db:"role"`
		Action string    `db:"action"`
		Before *string   `db:"before_json"`
		After  string    `db:"after_json"`
	}
	if err := s.db.SelectContext(ctx, &rows, `SELECT at, actor, role, action, before_json, after_json FROM promotion_audit
 WHERE promo_id = ? AND promo_type = ? ORDER BY id DESC LIMIT ?`, id.PromoID, id.Type, limit); err != nil {
		return nil, fmt.Errorf("store: history of %s: %w", id, err)
	}
	out := make([]AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = AuditEntry{At: r.At.UTC(), Actor: Actor{Name: r.Actor, Role: r.Role}, Action: Op(r.Action),
			Before: json.RawMessage("null"), After: json.RawMessage(r.After)}
		if proposalStep(r.Action) {
			out[i].After, out[i].Proposal = json.RawMessage("null"), json.RawMessage(r.After)
		}
		if r.Before != nil {
			out[i].Before = json.RawMessage(*r.Before)
		}
	}
	return out, nil
}
