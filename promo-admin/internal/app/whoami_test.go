package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
	"github.com/flashsale/platform/promo-admin/internal/admintransport"
)

// GET /v1/whoami answers every token promo-admin knows with its name and role,
// never cached; no token, an unknown one and another service's are 401.
func TestWhoAmI(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	for _, c := range []struct {
		token string
		want  admintransport.WhoAmI
	}{
		{admintest.AdminToken, admintransport.WhoAmI{Name: admintest.MerchandiserName, Role: "merchandiser"}},
		{admintest.ViewerToken, admintransport.WhoAmI{Name: "", Role: "viewer"}}, // the test's viewer token has no name
		{admintest.OnCallToken, admintransport.WhoAmI{Name: admintest.OnCallName, Role: "oncall"}},
		{admintest.ApproverToken, admintransport.WhoAmI{Name: admintest.ApproverName, Role: "approver"}},
		{admintest.SelfApproverToken, admintransport.WhoAmI{Name: admintest.MerchandiserName, Role: "approver"}},
	} {
		r := e.Do(http.MethodGet, "/v1/whoami", c.token, nil)
		var got admintransport.WhoAmI
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil || got != c.want {
			t.Errorf("whoami with %s: %s, want 200 %+v", c.token, r, c.want)
		}
		if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("whoami with %s: Cache-Control %q, want no-store", c.token, cc)
		}
	}
	for _, tok := range []string{"", "not-a-token", admintest.CheckoutToken} {
		if r := e.Do(http.MethodGet, "/v1/whoami", tok, nil); r.Status != http.StatusUnauthorized || r.Error().Code != "UNAUTHORIZED" {
			t.Errorf("whoami with %q: %s, want 401 UNAUTHORIZED", tok, r)
		}
	}
	if r := e.Do(http.MethodPost, "/v1/whoami", admintest.AdminToken, nil); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/whoami: %s, want 405", r)
	}
}

// An approver reads what a decision needs: the promotion a PATCH proposal would
// change (its current total), the list, its history with the proposal, its
// timeline; it still writes nothing (403, nothing changed).
func TestApproverReadsWhatADecisionNeeds(t *testing.T) {
	t.Parallel()
	e := startApproval(t, adminservice.Config{})
	id := uid("appr-reads")
	approve(t, e, propose(t, e, id).ID, approver)
	pr := proposalOf(t, e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 20}))
	if r := e.Do(http.MethodGet, path(id), approver, nil); r.Status != http.StatusOK || r.Promotion().Total != 100 {
		t.Errorf("the approver's read of the promotion: %s, want 200 with total 100 (the proposal's from)", r)
	}
	if r := e.Do(http.MethodGet, "/v1/promotions", approver, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"promoId":"`+id+`"`) {
		t.Errorf("the approver's list: %s", r)
	}
	if r := e.Do(http.MethodGet, path(id)+"/history", approver, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"PROPOSED"`) {
		t.Errorf("the approver's history: %s, want 200 with the PROPOSED step", r)
	}
	if r := e.Do(http.MethodGet, path(id)+"/timeline", approver, nil); r.Status != http.StatusOK {
		t.Errorf("the approver's timeline: %s", r)
	}
	ids := []store.ID{{PromoID: id, Type: 1}, {PromoID: id + "-new", Type: 1}}
	before := e.Snapshot(ids...)
	for _, w := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/v1/promotions", e.Spec(id + "-new")},
		{http.MethodPatch, path(id), map[string]any{"perPinLimit": 3}},
		{http.MethodPost, path(id) + "/stop", map[string]any{"reason": "x"}},
		{http.MethodDelete, path(id), nil},
		{http.MethodPut, "/v1/switches", map[string]any{"document": map[string]any{}, "ifMd5": ""}},
		{http.MethodGet, "/v1/switches", nil},
	} {
		if r := e.Do(w.method, w.path, approver, w.body); r.Status != http.StatusForbidden || r.Error().Code != "FORBIDDEN" {
			t.Errorf("%s %s with the approver token: %s, want 403", w.method, w.path, r)
		}
	}
	if after := e.Snapshot(ids...); after != before {
		t.Errorf("the approver's refused writes changed something:\nbefore %s\nafter  %s", before, after)
	}
	if p := proposalOf(t, e.Do(http.MethodGet, proposalPath(pr.ID), approver, nil)); p.Status != store.ProposalPending {
		t.Errorf("the proposal after the approver's reads: %+v, want PENDING", p)
	}
}
