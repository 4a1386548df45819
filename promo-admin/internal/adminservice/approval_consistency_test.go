package adminservice_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// An approval whose shard dies after the journal recorded its change answers 503
// and leaves the proposal APPLYING, the truth: nothing of the change is half
// applied, the repairer undoes it once the shard answers, and a later approval,
// past the retry delay, finds the promotion untouched and applies the proposal.
func TestApprovalWhoseShardDiesStaysApplyingThenRetries(t *testing.T) {
	t.Parallel()
	rs := admintest.StartRedis(t)
	cfg := config()
	cfg.RequireApproval = true
	e := admintest.Start(t, admintest.Options{RedisAddrs: rs.Addrs(), Service: cfg})
	id := "appr-dies-" + testenv.Suffix()
	approveOK(t, e, proposeOK(t, e, http.MethodPost, "/v1/promotions", e.Spec(id)))
	patch := proposeOK(t, e, http.MethodPatch, "/v1/promotions/"+id+"/1", map[string]any{"total": 40})

	var once sync.Once
	adminservice.SetFaults(e.App.Admin, func() { once.Do(rs.Kill) }, nil)
	claimed := e.Clock.Now()
	r := e.Do(http.MethodPost, fmt.Sprintf("/v1/proposals/%d/approve", patch), admintest.ApproverToken, nil)
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Error().Message, "APPLYING") {
		t.Fatalf("approve with the shard dying: %s, want 503 saying the proposal stays APPLYING", r)
	}
	if p := proposalStatus(t, e, patch); p != store.ProposalApplying {
		t.Fatalf("the proposal after a 503: %s, want APPLYING", p)
	}
	if r := e.Do(http.MethodPost, fmt.Sprintf("/v1/proposals/%d/approve", patch), admintest.Approver2Token, nil); r.Status != http.StatusConflict ||
		r.Error().Code != "PROPOSAL_APPLYING" {
		t.Errorf("another approval meanwhile: %s, want 409 PROPOSAL_APPLYING", r)
	}
	repairOnceTheShardAnswers(t, e, rs, id, fmt.Sprintf("redis shard %d", shardOf(id)), claimed)
	if row, _ := e.Row(id, 1); row.Version != 1 || row.Spec.Total != 100 {
		t.Fatalf("after repair: version %d total %d, want the change undone", row.Version, row.Spec.Total)
	}

	adminservice.SetFaults(e.App.Admin, nil, nil)
	e.Clock.Advance(3 * grace)
	// Claims are aged by MySQL's clock: move this one back past the retry delay there.
	if _, err := e.App.Store.DB().ExecContext(context.Background(),
		"UPDATE proposals SET decided_at = decided_at - INTERVAL 1 HOUR WHERE id = ?", patch); err != nil {
		t.Fatal(err)
	}
	approveOK(t, e, patch)
	if row, _ := e.Row(id, 1); row.Version != 2 || row.Spec.Total != 40 {
		t.Errorf("after the retried approval: version %d total %d, want 2 and 40", row.Version, row.Spec.Total)
	}
	e.Agree(id, 1)
}

// proposeOK sends a create or patch and returns the id of the proposal it made (202).
func proposeOK(t *testing.T, e *admintest.Env, method, path string, body any) int64 {
	t.Helper()
	r := e.Do(method, path, admintest.AdminToken, body)
	var p adminservice.Proposal
	if r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &p) != nil {
		t.Fatalf("%s %s with approval on: %s, want 202", method, path, r)
	}
	return p.ID
}

func approveOK(t *testing.T, e *admintest.Env, n int64) {
	t.Helper()
	if r := e.Do(http.MethodPost, fmt.Sprintf("/v1/proposals/%d/approve", n), admintest.ApproverToken, nil); r.Status != http.StatusOK {
		t.Fatalf("approve %d: %s", n, r)
	}
}

func proposalStatus(t *testing.T, e *admintest.Env, n int64) string {
	t.Helper()
	p, err := store.NewProposals(e.App.Store.DB()).Get(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	return p.Status
}
