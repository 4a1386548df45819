package privilege_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/privilege"
	"github.com/flashsale/platform/internal/store"
)

// promo-admin's approval queue, as flashsale_admin: a proposal recorded, read,
// paged and decided; and what the grants leave out refused (a proposal's body,
// proposer or promotion rewritten, a proposal removed, the queue written by the
// grab service).
func TestMySQLGrantsHoldPromoAdminsProposals(t *testing.T) {
	m := privilege.StartMySQL(t)
	ctx, now := context.Background(), time.Now()
	admin := m.Store(privilege.MySQLAdmin)
	q := store.NewProposals(admin.DB())
	id, err := q.Propose(ctx, store.Proposal{PromoID: "PR", Type: 1, Kind: store.ProposeCreate, Body: `{}`,
		Proposer: store.Actor{Name: "alice", Role: "merchandiser"}, ProposedAt: now}, store.Bounds{PerPromotion: 1, Total: 1})
	must(t, "propose", err)
	_, err = q.Get(ctx, id)
	must(t, "read a proposal", err)
	_, err = q.Page(ctx, store.ProposalPending, "", 10)
	must(t, "page the queue", err)
	must(t, "decide", q.Reject(ctx, id, store.Actor{Name: "bob", Role: "approver"}, "no", now))

	refused(t, admin, privilege.MySQLAdmin, "UPDATE proposals SET body_json = '{}'", "UPDATE proposals SET proposer = 'mallory'",
		"UPDATE proposals SET promo_id = 'X'", "DELETE FROM proposals")
	grab := m.Store(privilege.MySQLGrab)
	refused(t, grab, privilege.MySQLGrab, "SELECT id FROM proposals", "INSERT INTO proposals (promo_id) VALUES ('x')")
}
