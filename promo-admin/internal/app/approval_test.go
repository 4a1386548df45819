package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

const (
	approver  = admintest.ApproverToken
	approver2 = admintest.Approver2Token
)

// startApproval is promo-admin with --require-approval.
func startApproval(t *testing.T, svc adminservice.Config) *admintest.Env {
	t.Helper()
	svc.RequireApproval = true
	return admintest.Start(t, admintest.Options{Service: svc})
}

// proposalOf decodes a Proposal answer.
func proposalOf(t *testing.T, r admintest.Response) adminservice.Proposal {
	t.Helper()
	var p adminservice.Proposal
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("not a proposal: %s", r)
	}
	return p
}

func proposalPath(id int64) string { return fmt.Sprintf("/v1/proposals/%d", id) }

// propose sends a create of id and wants it recorded: 202, PENDING, nothing applied.
func propose(t *testing.T, e *admintest.Env, id string) adminservice.Proposal {
	t.Helper()
	r := e.Do(http.MethodPost, "/v1/promotions", admin, e.Spec(id))
	if r.Status != http.StatusAccepted {
		t.Fatalf("create with approval on: %s, want 202", r)
	}
	p := proposalOf(t, r)
	var answered, read struct{ ProposedAt string }
	_ = json.Unmarshal(r.Body, &answered)
	_ = json.Unmarshal(e.Do(http.MethodGet, proposalPath(p.ID), viewer, nil).Body, &read)
	if answered.ProposedAt == "" || answered.ProposedAt != read.ProposedAt {
		t.Errorf("proposedAt answered %q, read %q: want one instant to the millisecond", answered.ProposedAt, read.ProposedAt)
	}
	if p.ID < 1 || p.PromoID != id || p.Type != 1 || p.Kind != store.ProposeCreate || p.BaseVersion != 0 ||
		p.Status != store.ProposalPending || p.Proposer.Name != admintest.MerchandiserName || p.Proposer.Role != "merchandiser" || p.DecidedBy != nil {
		t.Errorf("proposal: %s", r)
	}
	nothingApplied(t, e, id)
	return p
}

// nothingApplied wants no promotion row and no hash of id.
func nothingApplied(t *testing.T, e *admintest.Env, id string) {
	t.Helper()
	if row, ok := e.Row(id, 1); ok {
		t.Errorf("a proposal made a row: %+v", row)
	}
	if h, ok := e.Hash(id, 1); ok {
		t.Errorf("a proposal reached Redis: %+v", h)
	}
}

// approve approves proposal n with token and wants 200 and the promotion made.
func approve(t *testing.T, e *admintest.Env, n int64, token string) promo.Promotion {
	t.Helper()
	r := e.Do(http.MethodPost, proposalPath(n)+"/approve", token, nil)
	var a struct {
		Proposal  adminservice.Proposal
		Promotion promo.Promotion
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &a) != nil {
		t.Fatalf("approve %d: %s", n, r)
	}
	if a.Proposal.Status != store.ProposalApproved || a.Proposal.DecidedBy == nil || a.Proposal.DecidedAt == nil {
		t.Errorf("approved: %s", r)
	}
	return a.Promotion
}

// A create with approval on is a proposal: listed PENDING, nothing in MySQL's
// promotion table or Redis; the proposer may not approve it; an approver's
// approval makes the promotion a direct create would, grab-visible, with every
// step in its history.
func TestApprovalOfACreate(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{})
	id := uid("appr-create")
	p := propose(t, e, id)
	for _, tok := range []string{admin, viewer, approver} {
		r := e.Do(http.MethodGet, "/v1/proposals?status=PENDING", tok, nil)
		var page adminservice.ProposalPage
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &page) != nil || len(page.Items) != 1 || page.Items[0].ID != p.ID {
			t.Errorf("the pending list with %s: %s", tok, r)
		}
	}
	if r := e.Do(http.MethodGet, proposalPath(p.ID), viewer, nil); r.Status != http.StatusOK || proposalOf(t, r).Status != store.ProposalPending ||
		string(proposalOf(t, r).Change) == "{}" {
		t.Errorf("get: %s", r)
	}
	second := e.Do(http.MethodPost, "/v1/promotions", admin, e.Spec(id))
	if second.Status != http.StatusAccepted {
		t.Fatalf("a second proposal of the key: %s (refused only at approval)", second)
	}
	if r := e.Do(http.MethodPost, proposalPath(p.ID)+"/approve", admintest.SelfApproverToken, nil); r.Status != http.StatusForbidden ||
		r.Error().Code != "SELF_APPROVAL" {
		t.Errorf("self-approval: %s, want 403 SELF_APPROVAL", r)
	}
	nothingApplied(t, e, id)
	got := approve(t, e, p.ID, approver)
	if got.PromoID != id || got.Total != 100 || got.Remaining != 100 || got.State != promo.Active || got.PerPinLimit != 2 {
		t.Errorf("the promotion approved: %+v", got)
	}
	e.Agree(id, 1)
	if row, _ := e.Row(id, 1); row.Version != 1 {
		t.Errorf("row version %d, want 1 as a direct create", row.Version)
	}
	if code := grabOn(t, e, id, "r1", promo.NoChannel); code != lua.CodeOK {
		t.Errorf("a grab of the approved promotion: %v", code)
	}
	if r := e.Do(http.MethodPost, proposalPath(p.ID)+"/approve", approver2, nil); r.Status != http.StatusConflict || r.Error().Code != "PROPOSAL_DECIDED" {
		t.Errorf("a second approval: %s, want 409 PROPOSAL_DECIDED", r)
	}
	r := e.Do(http.MethodPost, proposalPath(proposalOf(t, second).ID)+"/approve", approver2, nil)
	if r.Status != http.StatusConflict || r.Error().Code != "PROPOSAL_STALE" {
		t.Errorf("approve a create of a key taken since: %s, want 409 PROPOSAL_STALE", r)
	}
	if row, _ := e.Row(id, 1); row.Version != 1 {
		t.Errorf("the stale create changed the promotion: version %d", row.Version)
	}
	wantHistory(t, e, id, "FAILED test-approver-2", "APPROVED test-approver", "CREATE test-approver", "PROPOSED test-merchandiser", "PROPOSED test-merchandiser")
	if r := e.Do(http.MethodPost, "/v1/promotions", admin, e.Spec(id)); r.Status != http.StatusConflict || r.Error().Code != "ALREADY_EXISTS" {
		t.Errorf("a create of an existing key: %s, want 409 ALREADY_EXISTS as today", r)
	}
}

// wantHistory wants the promotion's audit trail, newest first, as "ACTION actor".
func wantHistory(t *testing.T, e *admintest.Env, id string, want ...string) {
	t.Helper()
	r := e.Do(http.MethodGet, path(id)+"/history", viewer, nil)
	var h struct {
		Entries []struct {
			Actor  struct{ Name string }
			Action string
		}
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &h) != nil {
		t.Fatalf("history: %s", r)
	}
	var have []string
	for _, en := range h.Entries {
		have = append(have, en.Action+" "+en.Actor.Name)
	}
	if fmt.Sprint(have) != fmt.Sprint(want) {
		t.Errorf("history of %s: %v, want %v", id, have, want)
	}
}

// A rejection needs a reason, applies nothing, and decides the proposal for good.
func TestApprovalReject(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{})
	id := uid("appr-reject")
	p := propose(t, e, id)
	for _, body := range []any{nil, map[string]any{}, map[string]any{"reason": ""}, map[string]any{"reason": " \t\n "}, map[string]any{"reason": 7}} {
		if r := e.Do(http.MethodPost, proposalPath(p.ID)+"/reject", approver, body); r.Status != http.StatusBadRequest {
			t.Errorf("reject with %v: %s, want 400", body, r)
		}
	}
	if r := e.Do(http.MethodPost, proposalPath(p.ID)+"/reject", admin, map[string]any{"reason": "mine"}); r.Status != http.StatusForbidden {
		t.Errorf("a merchandiser's rejection: %s, want 403", r)
	}
	if r := e.Do(http.MethodPost, proposalPath(p.ID)+"/reject", admintest.SelfApproverToken, map[string]any{"reason": "mine"}); r.Status != http.StatusForbidden ||
		r.Error().Code != "SELF_APPROVAL" {
		t.Errorf("a rejection by the proposer's name: %s, want 403 SELF_APPROVAL", r)
	}
	r := e.Do(http.MethodPost, proposalPath(p.ID)+"/reject", approver, map[string]any{"reason": "  the price is wrong\n"})
	if got := proposalOf(t, r); r.Status != http.StatusOK || got.Status != store.ProposalRejected || got.Reason != "the price is wrong" ||
		got.DecidedBy == nil || got.DecidedBy.Name != admintest.ApproverName {
		t.Errorf("reject: %s", r)
	}
	nothingApplied(t, e, id)
	if r := e.Do(http.MethodPost, proposalPath(p.ID)+"/approve", approver, nil); r.Status != http.StatusConflict || r.Error().Code != "PROPOSAL_DECIDED" {
		t.Errorf("approve a rejected proposal: %s", r)
	}
	if r := e.Do(http.MethodPost, proposalPath(p.ID)+"/reject", approver2, map[string]any{"reason": "again"}); r.Status != http.StatusConflict ||
		r.Error().Code != "PROPOSAL_DECIDED" || strings.Contains(r.Error().Message, "store:") {
		t.Errorf("reject a rejected proposal: %s, want 409 PROPOSAL_DECIDED without the record's internals", r)
	}
	if r := e.Do(http.MethodGet, proposalPath(p.ID+1000), approver, nil); r.Status != http.StatusNotFound {
		t.Errorf("an unknown proposal: %s, want 404", r)
	}
	if r := e.Do(http.MethodPost, proposalPath(p.ID+1000)+"/approve", approver, nil); r.Status != http.StatusNotFound {
		t.Errorf("approve an unknown proposal: %s, want 404", r)
	}
	if r := e.Do(http.MethodGet, "/v1/proposals/x", approver, nil); r.Status != http.StatusBadRequest {
		t.Errorf("a malformed proposal id: %s, want 400", r)
	}
	if r := e.Do(http.MethodGet, "/v1/proposals?status=MAYBE", approver, nil); r.Status != http.StatusBadRequest || r.Error().Field != "status" {
		t.Errorf("an unknown status: %s, want 400 naming status", r)
	}
	wantHistory(t, e, id, "REJECTED test-approver", "PROPOSED test-merchandiser")
}

// A PATCH is validated and planned against the row as today, recorded against the
// row's version, and applied only by an approval; one approved after another
// change of the promotion is FAILED, 409 PROPOSAL_STALE, nothing applied.
func TestApprovalOfPatchesAndAStaleOne(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{})
	id := uid("appr-patch")
	approve(t, e, propose(t, e, id).ID, approver)
	if r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 0}); r.Status != http.StatusBadRequest || r.Error().Field != "total" {
		t.Errorf("an invalid patch: %s, want 400 as today", r)
	}
	if r := e.Do(http.MethodPatch, path(uid("none")), admin, map[string]any{"total": 5}); r.Status != http.StatusNotFound {
		t.Errorf("a patch of no promotion: %s, want 404 as today", r)
	}
	first := proposalOf(t, e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 150}))
	r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"perPinLimit": 5, "channels": []string{"APP"}})
	second := proposalOf(t, r)
	if r.Status != http.StatusAccepted || second.Kind != store.ProposePatch || second.BaseVersion != 1 || first.BaseVersion != 1 ||
		string(second.Change) != `{"perPinLimit":5,"channels":["APP"]}` {
		t.Fatalf("patch proposals: %+v; %s", first, r)
	}
	if h, _ := e.Hash(id, 1); h.Total != 100 || h.PerPin != 2 || h.Ver != 1 {
		t.Errorf("a patch proposal reached Redis: %+v", h)
	}
	got := approve(t, e, second.ID, approver)
	if got.PerPinLimit != 5 || got.Total != 100 || len(got.Channels.Names()) != 1 {
		t.Errorf("the patch approved: %+v", got)
	}
	e.Agree(id, 1)
	if r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 100}); r.Status != http.StatusOK || r.Promotion().Total != 100 {
		t.Errorf("a patch changing nothing guarded: %s, want 200, the promotion unchanged", r)
	}
	r = e.Do(http.MethodPost, proposalPath(first.ID)+"/approve", approver, nil)
	if r.Status != http.StatusConflict || r.Error().Code != "PROPOSAL_STALE" || strings.Contains(r.Error().Message, "store:") ||
		!strings.Contains(r.Error().Message, "version 2") {
		t.Errorf("a stale approval: %s, want 409 PROPOSAL_STALE saying why in words, without the record's internals", r)
	}
	failed := proposalOf(t, e.Do(http.MethodGet, proposalPath(first.ID), admin, nil))
	if failed.Status != store.ProposalFailed || failed.Reason != "the promotion is at version 2, the proposal was made at version 1" {
		t.Errorf("the stale proposal: %+v", failed)
	}
	if row, _ := e.Row(id, 1); row.Spec.Total != 100 || row.Version != 2 {
		t.Errorf("the stale patch applied: %+v", row)
	}
	e.Agree(id, 1)
}

// Two approvers approving one proposal at once: exactly one applies it.
func TestApprovalRace(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{})
	id := uid("appr-race")
	p := propose(t, e, id)
	var wg sync.WaitGroup
	answers := make([]admintest.Response, 2)
	for i, tok := range []string{approver, approver2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = e.Do(http.MethodPost, proposalPath(p.ID)+"/approve", tok, nil)
		}()
	}
	wg.Wait()
	ok, lost := 0, 0
	for _, r := range answers {
		switch {
		case r.Status == http.StatusOK:
			ok++
		case r.Status == http.StatusConflict && (r.Error().Code == "PROPOSAL_DECIDED" || r.Error().Code == "PROPOSAL_APPLYING"):
			lost++
		default:
			t.Errorf("an approval in the race: %s", r)
		}
	}
	if ok != 1 || lost != 1 {
		t.Fatalf("race: %d approved, %d refused; want 1 and 1: %s | %s", ok, lost, answers[0], answers[1])
	}
	if row, _ := e.Row(id, 1); row.Version != 1 {
		t.Errorf("row version %d, want 1: applied once", row.Version)
	}
	e.Agree(id, 1)
}

// Stop and delete stay immediate with approval on.
func TestApprovalLeavesStopAndDeleteImmediate(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{})
	id := uid("appr-stop")
	approve(t, e, propose(t, e, id).ID, approver)
	if r := e.Do(http.MethodPost, path(id)+"/stop", admin, map[string]any{"reason": "wrong price"}); r.Status != http.StatusOK ||
		r.Promotion().State != promo.Stopped {
		t.Fatalf("stop: %s, want 200 STOPPED at once", r)
	}
	if h, _ := e.Hash(id, 1); h.State != string(promo.Stopped) {
		t.Errorf("the hash after the stop: %+v", h)
	}
	if r := e.Do(http.MethodDelete, path(id), admin, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	e.Agree(id, 1)
}

// With approval off (the default), the queue's routes answer 409 APPROVAL_OFF and
// a create applies at once.
func TestApprovalOff(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/proposals"}, {http.MethodGet, "/v1/proposals/1"}, {http.MethodPost, "/v1/proposals/1/approve"},
	} {
		if r := e.Do(c.method, c.path, approver, nil); r.Status != http.StatusConflict || r.Error().Code != "APPROVAL_OFF" {
			t.Errorf("%s %s with approval off: %s", c.method, c.path, r)
		}
	}
	e.Create(uid("appr-off"))
}

// The queue is bounded: a flood of proposals past the bound is refused 409
// PROPOSALS_FULL, nothing recorded; per promotion too.
func TestApprovalQueueBounded(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{ProposalsPerPromotion: 2, ProposalsTotal: 5})
	id := uid("appr-flood")
	approve(t, e, propose(t, e, id).ID, approver)
	for i, want := range []int{http.StatusAccepted, http.StatusAccepted, http.StatusConflict} {
		if r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 200 + i}); r.Status != want {
			t.Errorf("patch proposal %d of one promotion: %s, want %d", i, r, want)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.Do(http.MethodPost, "/v1/promotions", admin, e.Spec(fmt.Sprintf("%s-%d", id, i)))
			if r.Status == http.StatusConflict && r.Error().Code != "PROPOSALS_FULL" {
				t.Errorf("a refused proposal: %s", r)
			}
			mu.Lock()
			defer mu.Unlock()
			statuses[r.Status]++
		}()
	}
	wg.Wait()
	if statuses[http.StatusAccepted] != 3 || statuses[http.StatusConflict] != 9 {
		t.Errorf("the flood: %v, want 3 accepted (2 of 5 places taken) and 9 refused", statuses)
	}
	page, err := e.App.Store.DB().QueryxContext(context.Background(), "SELECT COUNT(*) FROM proposals WHERE status = 'PENDING'")
	if err != nil {
		t.Fatal(err)
	}
	defer page.Close()
	var n int
	if page.Next() && page.Scan(&n) == nil && n != 5 {
		t.Errorf("%d pending proposals recorded, want 5", n)
	}
}

// An approval left APPLYING by a process that died is retried by a later approval
// once the claim is old by MySQL's clock (a replica's own clock, however far
// ahead, does not age it) and the promotion shows nothing of it, and stays
// APPLYING otherwise.
func TestApprovalRetriesAnAbandonedClaim(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{})
	q := store.NewProposals(e.App.Store.DB())
	ctx := context.Background()
	id := uid("appr-retry")
	p := propose(t, e, id)
	dead := store.Actor{Name: admintest.Approver2Name, Role: "approver"}
	if _, err := q.Claim(ctx, p.ID, dead); err != nil {
		t.Fatal(err)
	}
	if r := e.Do(http.MethodPost, proposalPath(p.ID)+"/approve", approver, nil); r.Status != http.StatusConflict || r.Error().Code != "PROPOSAL_APPLYING" {
		t.Errorf("approve one being applied: %s, want 409 PROPOSAL_APPLYING", r)
	}
	e.Clock.Advance(time.Hour)
	if r := e.Do(http.MethodPost, proposalPath(p.ID)+"/approve", approver, nil); r.Status != http.StatusConflict || r.Error().Code != "PROPOSAL_APPLYING" {
		t.Errorf("approve a fresh claim on a replica whose clock runs an hour ahead: %s, want 409 PROPOSAL_APPLYING", r)
	}
	ageClaim(t, e, p.ID)
	approve(t, e, p.ID, approver)
	e.Agree(id, 1)

	other := proposalOf(t, e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 300}))
	if _, err := q.Claim(ctx, other.ID, dead); err != nil {
		t.Fatal(err)
	}
	if r := e.Do(http.MethodPost, path(id)+"/stop", admin, map[string]any{"reason": "moved on"}); r.Status != http.StatusOK {
		t.Fatalf("stop: %s", r) // the promotion moves on: version 2
	}
	ageClaim(t, e, other.ID)
	if r := e.Do(http.MethodPost, proposalPath(other.ID)+"/approve", approver, nil); r.Status != http.StatusConflict || r.Error().Code != "PROPOSAL_APPLYING" {
		t.Errorf("retry of a claim whose promotion moved: %s, want 409 PROPOSAL_APPLYING", r)
	}
	if got := proposalOf(t, e.Do(http.MethodGet, proposalPath(other.ID), admin, nil)); got.Status != store.ProposalApplying {
		t.Errorf("the claim left: %+v, want APPLYING", got)
	}
}

// ageClaim moves proposal n's claim an hour back in MySQL, whose clock ages claims.
func ageClaim(t *testing.T, e *admintest.Env, n int64) {
	t.Helper()
	if _, err := e.App.Store.DB().ExecContext(context.Background(),
		"UPDATE proposals SET decided_at = decided_at - INTERVAL 1 HOUR WHERE id = ? AND status = 'APPLYING'", n); err != nil {
		t.Fatal(err)
	}
}

// A promotion in buckets and an envelope pool go through approval as through a
// direct create: every bucket's hash, the pool's split, row and hashes agreeing.
func TestApprovalOfBucketsAndAPool(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{})
	id, pool := uid("appr-buckets"), uid("appr-pool")
	for _, body := range []map[string]any{bucketSpec(e, id, 4, 100), poolBody(e, pool, 10, 1000, 10)} {
		r := e.Do(http.MethodPost, "/v1/promotions", admin, body)
		if r.Status != http.StatusAccepted {
			t.Fatalf("propose %v: %s", body["promoId"], r)
		}
		nothingApplied(t, e, body["promoId"].(string))
		approve(t, e, proposalOf(t, r).ID, approver)
	}
	if r := e.Do(http.MethodGet, path(id), viewer, nil); r.Status != http.StatusOK || r.Promotion().Buckets != 4 {
		t.Errorf("the bucketed promotion approved: %s", r)
	}
	e.Agree(id, 1)
	if amounts, _ := e.Pool(pool, 1); len(amounts) != 10 {
		t.Errorf("the pool approved holds %d envelopes, want 10", len(amounts))
	}
	e.Agree(pool, 1)
	p := proposalOf(t, e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 200}))
	approve(t, e, p.ID, approver)
	e.Agree(id, 1)
}

// A proposal whose change is refused when approved (its end passed meanwhile) is
// FAILED with the reason, 409 PROPOSAL_FAILED, nothing applied.
func TestApprovalOfAChangeRefusedWhenApplied(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{})
	id := uid("appr-late")
	spec := e.Spec(id)
	spec["endAt"] = e.Clock.Now().Add(time.Hour).Format(time.RFC3339Nano)
	r := e.Do(http.MethodPost, "/v1/promotions", admin, spec)
	if r.Status != http.StatusAccepted {
		t.Fatalf("propose: %s", r)
	}
	e.Clock.Advance(2 * time.Hour)
	p := proposalOf(t, r)
	if r := e.Do(http.MethodPost, proposalPath(p.ID)+"/approve", approver, nil); r.Status != http.StatusConflict || r.Error().Code != "PROPOSAL_FAILED" {
		t.Errorf("approve a create whose end has passed: %s, want 409 PROPOSAL_FAILED", r)
	}
	got := proposalOf(t, e.Do(http.MethodGet, proposalPath(p.ID), viewer, nil))
	if got.Status != store.ProposalFailed || got.Reason == "" || got.DecidedBy == nil || got.DecidedBy.Name != admintest.ApproverName {
		t.Errorf("the refused proposal: %+v", got)
	}
	nothingApplied(t, e, id)
}

// With approval on, a PATCH re-sending the values the promotion has (a console
// saving a form unchanged) writes nothing and answers 200 with the promotion: its
// version, its history and the pending proposals made against it stay as they
// are, so those still approve.
func TestApprovalPatchChangingNothingWritesNothing(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{})
	id := uid("appr-same")
	approve(t, e, propose(t, e, id).ID, approver)
	pending := proposalOf(t, e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 150}))
	for _, body := range []map[string]any{{"total": 100}, {"total": 100, "perPinLimit": 2}, {"channels": []string{}}} {
		r := e.Do(http.MethodPatch, path(id), admin, body)
		if got := r.Promotion(); r.Status != http.StatusOK || got.Total != 100 || got.Remaining != 100 || got.PerPinLimit != 2 {
			t.Errorf("a patch %v changing nothing: %s, want 200 and the promotion unchanged", body, r)
		}
	}
	if row, _ := e.Row(id, 1); row.Version != 1 || row.Pending != nil {
		t.Errorf("a patch changing nothing wrote the row: version %d, pending %v", row.Version, row.Pending)
	}
	wantHistory(t, e, id, "PROPOSED test-merchandiser", "APPROVED test-approver", "CREATE test-approver", "PROPOSED test-merchandiser")
	if got := approve(t, e, pending.ID, approver); got.Total != 150 {
		t.Errorf("the pending proposal approved after the unchanged patches: %+v", got)
	}
	e.Agree(id, 1)
}

// An approval whose apply runs out of its time before the journal recorded
// anything (the promotion's row held locked past it) puts the proposal back
// PENDING, as the contract says, although the apply's own context is spent: the
// release runs on a context of its own. A later approval then applies it.
func TestApprovalTimedOutBeforeRecordingIsPendingAgain(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{RepairGrace: time.Second})
	id := uid("appr-timeout")
	approve(t, e, propose(t, e, id).ID, approver)
	p := proposalOf(t, e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 150}))
	ctx := context.Background()
	lock, err := e.App.Store.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var v int64
	if err := lock.QueryRowxContext(ctx, "SELECT version FROM promotion WHERE promo_id = ? AND promo_type = 1 FOR UPDATE", id).Scan(&v); err != nil {
		t.Fatal(err)
	}
	r := e.Do(http.MethodPost, proposalPath(p.ID)+"/approve", approver, nil)
	_ = lock.Rollback()
	if r.Status != http.StatusServiceUnavailable {
		t.Errorf("an approval whose apply timed out on a locked row: %s, want 503", r)
	}
	if got := proposalOf(t, e.Do(http.MethodGet, proposalPath(p.ID), admin, nil)); got.Status != store.ProposalPending || got.DecidedBy != nil {
		t.Fatalf("the proposal after a timeout before anything was recorded: %+v, want PENDING", got)
	}
	if got := approve(t, e, p.ID, approver); got.Total != 150 {
		t.Errorf("approved again: %+v", got)
	}
	e.Agree(id, 1)
}

// A proposer is refused the decision however their name is spelled: a token's
// name in another case or with spaces around it (a record from before names were
// normalised, or a token entry spelled so) is the same person.
func TestApprovalSelfApprovalIgnoresCaseAndSpaces(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{})
	q := store.NewProposals(e.App.Store.DB())
	id := uid("appr-self")
	body, err := json.Marshal(e.Spec(id))
	if err != nil {
		t.Fatal(err)
	}
	n, err := q.Propose(context.Background(), store.Proposal{PromoID: id, Type: 1, Kind: store.ProposeCreate, Body: string(body),
		Proposer: store.Actor{Name: " Test-Approver ", Role: "merchandiser"}, ProposedAt: e.Clock.Now()}, store.Bounds{PerPromotion: 5, Total: 100})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.Do(http.MethodPost, proposalPath(n)+"/approve", approver, nil); r.Status != http.StatusForbidden || r.Error().Code != "SELF_APPROVAL" {
		t.Errorf("approve one's own proposal under a name spelled otherwise: %s, want 403 SELF_APPROVAL", r)
	}
	if r := e.Do(http.MethodPost, proposalPath(n)+"/reject", approver, map[string]any{"reason": "mine"}); r.Status != http.StatusForbidden ||
		r.Error().Code != "SELF_APPROVAL" {
		t.Errorf("reject one's own proposal under a name spelled otherwise: %s, want 403 SELF_APPROVAL", r)
	}
	nothingApplied(t, e, id)
}

// An approval whose claim is taken over while its change waits to be recorded
// (here: the promotion's row, or its key, held locked, and the claim moved
// meanwhile as a takeover moves it) records nothing: a patch is refused in its
// own transaction, a create is undone before it reaches Redis; it answers 409
// PROPOSAL_APPLYING, and the approval holding the claim now applies the change,
// once.
func TestApprovalWhoseClaimIsTakenOverRecordsNothing(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{})
	id := uid("appr-taken")
	created := propose(t, e, id)
	takenOverMidway(t, e, id, created.ID)
	nothingApplied(t, e, id)
	approve(t, e, created.ID, approver2)
	e.Agree(id, 1)

	patch := proposalOf(t, e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 150}))
	takenOverMidway(t, e, id, patch.ID)
	if row, _ := e.Row(id, 1); row.Version != 1 || row.Spec.Total != 100 || row.Pending != nil {
		t.Errorf("a patch whose claim was taken over changed the row: %+v", row)
	}
	if got := approve(t, e, patch.ID, approver2); got.Total != 150 {
		t.Errorf("the patch approved by the approval holding the claim: %+v", got)
	}
	if row, _ := e.Row(id, 1); row.Version != 2 {
		t.Errorf("row version %d, want 2: the patch applied once", row.Version)
	}
	e.Agree(id, 1)
}

// takenOverMidway approves proposal n while the promotion's row (or key) is held
// locked, moves the claim as a takeover would once the approval claimed it, lets
// the approval go on and wants 409 PROPOSAL_APPLYING.
func takenOverMidway(t *testing.T, e *admintest.Env, id string, n int64) {
	t.Helper()
	ctx := context.Background()
	lock, err := e.App.Store.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback() //nolint:errcheck // released below
	rows, err := lock.QueryContext(ctx, "SELECT version FROM promotion WHERE promo_id = ? AND promo_type = 1 FOR UPDATE", id)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	answer := make(chan admintest.Response, 1)
	go func() { answer <- e.Do(http.MethodPost, proposalPath(n)+"/approve", approver, nil) }()
	q := store.NewProposals(e.App.Store.DB())
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if p, err := q.Get(ctx, n); err == nil && p.Status == store.ProposalApplying {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the approval never claimed the proposal")
		}
	}
	ageClaim(t, e, n)
	_ = lock.Rollback()
	if r := <-answer; r.Status != http.StatusConflict || r.Error().Code != "PROPOSAL_APPLYING" {
		t.Errorf("an approval whose claim was taken over midway: %s, want 409 PROPOSAL_APPLYING", r)
	}
}
