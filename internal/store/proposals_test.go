package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/store"
)

// A proposal is recorded PENDING, decided once, and paged newest first with a cursor.
func TestProposalsRecordDecideAndPage(t *testing.T) {
	t.Parallel()
	s := open(t)
	q := store.NewProposals(s.DB())
	ctx, now := context.Background(), time.Now()
	b := store.Bounds{PerPromotion: 5, Total: 10}
	alice := store.Actor{Name: "alice", Role: "merchandiser"}
	var ids []int64
	for _, id := range []string{"P1", "P2", "P3"} {
		n, err := q.Propose(ctx, store.Proposal{PromoID: id, Type: 1, Kind: store.ProposeCreate, Body: `{"promoId":"` + id + `"}`,
			Proposer: alice, ProposedAt: now}, b)
		must(t, err)
		ids = append(ids, n)
	}
	bob := store.Actor{Name: "bob", Role: "approver"}
	must(t, q.Reject(ctx, ids[0], bob, "wrong price", now))
	if err := q.Reject(ctx, ids[0], bob, "again", now); !errors.Is(err, store.ErrProposalDecided) {
		t.Fatalf("a second decision: %v", err)
	}
	if err := q.Reject(ctx, 1<<40, bob, "none", now); !errors.Is(err, store.ErrProposalNotFound) {
		t.Fatalf("a decision on no proposal: %v", err)
	}
	got, err := q.Get(ctx, ids[0])
	if err != nil || got.Status != store.ProposalRejected || got.Reason != "wrong price" || got.DecidedBy == nil ||
		got.DecidedBy.Name != "bob" || got.Proposer != alice || got.Body != `{"promoId":"P1"}` {
		t.Fatalf("the rejected proposal: %+v %v", got, err)
	}
	page, err := q.Page(ctx, store.ProposalPending, "", 1)
	if err != nil || len(page.Proposals) != 1 || page.Proposals[0].ID != ids[2] || page.NextCursor == "" {
		t.Fatalf("first pending page: %+v %v", page, err)
	}
	next, err := q.Page(ctx, store.ProposalPending, page.NextCursor, 1)
	if err != nil || len(next.Proposals) != 1 || next.Proposals[0].ID != ids[1] || next.NextCursor != "" {
		t.Fatalf("second pending page: %+v %v", next, err)
	}
	all, err := q.Page(ctx, "", "", store.MaxProposalPage)
	if err != nil || len(all.Proposals) != 3 {
		t.Fatalf("every status: %+v %v", all, err)
	}
	if _, err := q.Page(ctx, "", "x", 1); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("a bad cursor: %v", err)
	}
	if _, err := q.Page(ctx, "", "", store.MaxProposalPage+1); err == nil {
		t.Error("a page above the bound was read")
	}
}

// The queue is bounded per promotion and in all, also under concurrent proposers;
// a decided proposal frees its place.
func TestProposalsBounded(t *testing.T) {
	t.Parallel()
	s := open(t)
	q := store.NewProposals(s.DB())
	ctx, now := context.Background(), time.Now()
	b := store.Bounds{PerPromotion: 2, Total: 3}
	p := func(id string) store.Proposal {
		return store.Proposal{PromoID: id, Type: 1, Kind: store.ProposePatch, BaseVersion: 1, Body: `{}`,
			Proposer: store.Actor{Name: "alice", Role: "merchandiser"}, ProposedAt: now}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, full int
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := q.Propose(ctx, p("A"), b)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, store.ErrProposalsFull):
				full++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok != 2 || full != 4 {
		t.Fatalf("per promotion: %d taken, %d refused; want 2 and 4", ok, full)
	}
	first, err := q.Propose(ctx, p("B"), b)
	must(t, err)
	if _, err := q.Propose(ctx, p("C"), b); !errors.Is(err, store.ErrProposalsFull) {
		t.Fatalf("above the total: %v", err)
	}
	must(t, q.Reject(ctx, first, store.Actor{Name: "bob", Role: "approver"}, "no", now))
	if _, err := q.Propose(ctx, p("C"), b); err != nil {
		t.Fatalf("a decided proposal's place: %v", err)
	}
}

// An approval claims a proposal once (two approvers at once: one wins), finishes
// it APPROVED or FAILED with its audit entries, and a step of a claim taken over
// changes nothing.
func TestProposalsClaimFinishRelease(t *testing.T) {
	t.Parallel()
	s := open(t)
	q := store.NewProposals(s.DB())
	ctx, now := context.Background(), time.Now().UTC().Truncate(time.Millisecond)
	b := store.Bounds{PerPromotion: 5, Total: 10}
	alice := store.Actor{Name: "alice", Role: "merchandiser"}
	bob, carol := store.Actor{Name: "bob", Role: "approver"}, store.Actor{Name: "carol", Role: "approver"}
	id, err := q.Propose(ctx, store.Proposal{PromoID: "CL", Type: 1, Kind: store.ProposeCreate, Body: `{"promoId":"CL"}`,
		Proposer: alice, ProposedAt: now}, b)
	must(t, err)
	var wg sync.WaitGroup
	claims := make([]error, 2)
	for i, who := range []store.Actor{bob, carol} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, claims[i] = q.Claim(ctx, id, who)
		}()
	}
	wg.Wait()
	if (claims[0] == nil) == (claims[1] == nil) || !(errors.Is(claims[0], store.ErrProposalDecided) || errors.Is(claims[1], store.ErrProposalDecided)) {
		t.Fatalf("two claims at once: %v, %v; want exactly one", claims[0], claims[1])
	}
	held, err := q.Get(ctx, id)
	must(t, err)
	claimedAt := *held.DecidedAt
	if err := q.Reject(ctx, id, bob, "late", now); !errors.Is(err, store.ErrProposalDecided) {
		t.Fatalf("a rejection of a proposal being applied: %v", err)
	}
	if _, err := q.Finish(ctx, id, claimedAt.Add(time.Millisecond), store.ProposalApproved, "", now); !errors.Is(err, store.ErrProposalDecided) {
		t.Fatalf("a finish of another claim: %v", err)
	}
	must(t, q.Release(ctx, id, claimedAt))
	if got, _ := q.Get(ctx, id); got.Status != store.ProposalPending || got.DecidedBy != nil {
		t.Fatalf("released: %+v", got)
	}
	c, err := q.Claim(ctx, id, bob)
	must(t, err)
	if _, err := q.Reclaim(ctx, id, *c.DecidedAt, carol, time.Hour); !errors.Is(err, store.ErrClaimYoung) {
		t.Fatalf("a takeover of a fresh claim: %v, want ErrClaimYoung", err)
	}
	time.Sleep(10 * time.Millisecond)
	r, err := q.Reclaim(ctx, id, *c.DecidedAt, carol, time.Millisecond)
	must(t, err)
	if _, err := q.Finish(ctx, id, *c.DecidedAt, store.ProposalApproved, "", now); !errors.Is(err, store.ErrProposalDecided) {
		t.Fatalf("the first claim's finish after a reclaim: %v", err)
	}
	got, err := q.Finish(ctx, id, *r.DecidedAt, store.ProposalFailed, "the key is taken", now.Add(4*time.Second))
	must(t, err)
	if got.Status != store.ProposalFailed || got.DecidedBy.Name != "carol" || got.Reason != "the key is taken" {
		t.Fatalf("finished: %+v", got)
	}
	h, err := s.Promotions.History(ctx, store.ID{PromoID: "CL", Type: 1}, 10)
	must(t, err)
	if len(h) != 2 || h[0].Action != store.AuditFailed || h[0].Actor != carol || h[1].Action != store.AuditProposed || h[1].Actor != alice {
		t.Fatalf("audit: %+v", h)
	}
	want := fmt.Sprintf(`{"proposal":%d,"kind":"CREATE","status":"FAILED","change":{"promoId":"CL"},"reason":"the key is taken"}`, id)
	if string(h[0].Proposal) != want || string(h[0].After) != "null" || string(h[0].Before) != "null" {
		t.Errorf("the FAILED entry: before %s after %s proposal %s; want the proposal %s", h[0].Before, h[0].After, h[0].Proposal, want)
	}
}

// A takeover is decided by MySQL's clock and the promotion's row together: a
// claim is taken over only once old enough and while its promotion shows nothing
// of the change; and a change proposed under a claim taken over is refused in its
// own transaction (UpdateClaimed), nothing written, so two approvals never both
// record it.
func TestProposalsTakeoverAndTheClaimedChange(t *testing.T) {
	t.Parallel()
	s := open(t)
	q := store.NewProposals(s.DB())
	ctx, now := context.Background(), time.Now().UTC().Truncate(time.Millisecond)
	row := create(t, s, spec("TK", 100), now)
	bob, carol := store.Actor{Name: "bob", Role: "approver"}, store.Actor{Name: "carol", Role: "approver"}
	id, err := q.Propose(ctx, store.Proposal{PromoID: "TK", Type: 1, Kind: store.ProposePatch, BaseVersion: row.Version, Body: `{"total":150}`,
		Proposer: store.Actor{Name: "alice", Role: "merchandiser"}, ProposedAt: now}, store.Bounds{PerPromotion: 5, Total: 10})
	must(t, err)
	first, err := q.Claim(ctx, id, bob)
	must(t, err)
	time.Sleep(10 * time.Millisecond)
	second, err := q.Reclaim(ctx, id, *first.DecidedAt, carol, time.Millisecond)
	must(t, err)
	patch := func(p *store.Promotion) error { return p.Propose(store.OpPatch, p.Spec, p.State, now) }
	if _, err := s.Promotions.UpdateClaimed(ctx, row.ID(), store.ClaimRef{Proposal: id, At: *first.DecidedAt}, patch); !errors.Is(err, store.ErrClaimMoved) {
		t.Fatalf("a change under a claim taken over: %v, want ErrClaimMoved", err)
	}
	if got, _ := s.Promotions.Row(ctx, row.ID()); got.Pending != nil {
		t.Fatalf("the refused change was recorded: %+v", got.Pending)
	}
	_, err = s.Promotions.UpdateClaimed(ctx, row.ID(), store.ClaimRef{Proposal: id, At: *second.DecidedAt}, patch)
	must(t, err)
	time.Sleep(10 * time.Millisecond)
	if _, err := q.Reclaim(ctx, id, *second.DecidedAt, bob, time.Millisecond); !errors.Is(err, store.ErrClaimTouched) {
		t.Fatalf("a takeover while the claimed change is pending: %v, want ErrClaimTouched", err)
	}
	if got, _ := q.Get(ctx, id); got.Status != store.ProposalApplying || got.DecidedBy.Name != "carol" {
		t.Fatalf("the claim after a refused takeover: %+v", got)
	}
}

// The queue read by status (the console polls ?status=PENDING) reads the
// proposals_status index (migration 0017) backwards: no sort, however many
// proposals of other statuses the table holds.
func TestProposalsPageByStatusReadsItsIndex(t *testing.T) {
	t.Parallel()
	s := open(t)
	q := store.NewProposals(s.DB())
	ctx, now := context.Background(), time.Now()
	for i := range 30 {
		id, err := q.Propose(ctx, store.Proposal{PromoID: fmt.Sprintf("IX%d", i), Type: 1, Kind: store.ProposeCreate, Body: `{}`,
			Proposer: store.Actor{Name: "alice", Role: "merchandiser"}, ProposedAt: now}, store.Bounds{PerPromotion: 5, Total: 100})
		must(t, err)
		if i%3 != 0 {
			must(t, q.Reject(ctx, id, store.Actor{Name: "bob", Role: "approver"}, "no", now))
		}
	}
	var plan []struct {
		Key   *string `db:"key"`
		Extra *string `db:"Extra"`
	}
	var indexed int
	must(t, s.DB().GetContext(ctx, &indexed, `SELECT COUNT(*) FROM information_schema.statistics
 WHERE table_schema = DATABASE() AND table_name = 'proposals' AND index_name = 'proposals_status'`))
	if indexed != 2 {
		t.Fatalf("proposals_status has %d columns, want 2 (status, id)", indexed)
	}
	err := s.DB().Unsafe().SelectContext(ctx, &plan, `EXPLAIN SELECT * FROM proposals WHERE status = ? AND id < ? ORDER BY id DESC LIMIT ?`,
		store.ProposalPending, int64(1<<62), 21)
	must(t, err)
	if len(plan) != 1 || plan[0].Key == nil || *plan[0].Key != "proposals_status" || (plan[0].Extra != nil && strings.Contains(*plan[0].Extra, "filesort")) {
		t.Fatalf("the pending page's plan: key %s, extra %s, want the proposals_status index and no filesort", deref(plan[0].Key), deref(plan[0].Extra))
	}
	page, err := q.Page(ctx, store.ProposalPending, "", 5)
	if err != nil || len(page.Proposals) != 5 || page.NextCursor == "" {
		t.Fatalf("a pending page: %+v %v", page, err)
	}
	for _, p := range page.Proposals {
		if p.Status != store.ProposalPending {
			t.Fatalf("a %s proposal in the pending page", p.Status)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
