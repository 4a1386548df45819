package app_test

import (
	"net/http"
	"testing"

	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// Every route with every kind of caller: merchandisers write and read, viewers
// only read, unknown or missing tokens (another service's included) are 401,
// a known token without the role 403; a refused caller changes nothing.
func TestRolesOnEveryRoute(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	newID := uid("role-new")
	ids := map[string]string{}
	for _, name := range []string{"get", "patch", "stop", "delete"} {
		ids[name] = uid("role-" + name)
		e.Create(ids[name])
	}
	routes := []roleRoute{
		{"create", http.MethodPost, "/v1/promotions", e.Spec(newID), true, http.StatusCreated},
		{"list", http.MethodGet, "/v1/promotions", nil, false, http.StatusOK},
		{"get", http.MethodGet, path(ids["get"]), nil, false, http.StatusOK},
		{"patch", http.MethodPatch, path(ids["patch"]), map[string]any{"total": 50}, true, http.StatusOK},
		{"stop", http.MethodPost, path(ids["stop"]) + "/stop", map[string]any{"reason": "x"}, true, http.StatusOK},
		{"delete", http.MethodDelete, path(ids["delete"]), nil, true, http.StatusNoContent},
		{"switches", http.MethodGet, "/v1/switches", nil, false, http.StatusOK},
		{"switch history", http.MethodGet, "/v1/switches/history", nil, false, http.StatusOK},
		{"timeline", http.MethodGet, path(ids["get"]) + "/timeline", nil, false, http.StatusOK},
	}
	all := []store.ID{{PromoID: newID, Type: 1}}
	for _, id := range ids {
		all = append(all, store.ID{PromoID: id, Type: 1})
	}
	for _, rt := range routes {
		checkRoute(t, e, rt, all)
	}
	// On-call's token changes the switches and reads them; it is no merchandiser's.
	if r := e.Do(http.MethodGet, "/v1/switches", admintest.OnCallToken, nil); r.Status != http.StatusOK {
		t.Errorf("switches with the on-call token: %s", r)
	}
	for _, tok := range []string{admintest.AdminToken, admintest.ViewerToken} {
		if r := e.Do(http.MethodPut, "/v1/switches", tok, map[string]any{"document": map[string]any{}, "ifMd5": ""}); r.Status != http.StatusForbidden {
			t.Errorf("PUT /v1/switches with %s: want 403, have %s", tok, r)
		}
	}
	before := e.Snapshot(all...)
	for _, rt := range routes {
		if rt.write {
			if r := e.Do(rt.method, rt.path, admintest.OnCallToken, rt.body); r.Status != http.StatusForbidden {
				t.Errorf("%s with the on-call token: want 403, have %s", rt.name, r)
			}
		}
	}
	if after := e.Snapshot(all...); after != before {
		t.Errorf("the on-call token changed a promotion:\nbefore %s\nafter  %s", before, after)
	}
}

// roleRoute is a route and the roles it takes: a write takes the merchandiser's
// token alone, ok is its success.
type roleRoute struct {
	name, method, path string
	body               any
	write              bool
	ok                 int
}

// checkRoute refuses rt to no token, unknown tokens and (for a write) the viewer's,
// changing nothing among all, and takes it from the merchandiser.
func checkRoute(t *testing.T, e *admintest.Env, rt roleRoute, all []store.ID) {
	t.Helper()
	refusals := []struct {
		name, token string
		status      int
		code        string
	}{
		{"missing token", "", http.StatusUnauthorized, "UNAUTHORIZED"},
		{"unknown token", "not-a-token", http.StatusUnauthorized, "UNAUTHORIZED"},
		{"grab-service's token", admintest.CheckoutToken, http.StatusUnauthorized, "UNAUTHORIZED"},
	}
	before := e.Snapshot(all...)
	for _, ref := range refusals {
		r := e.Do(rt.method, rt.path, ref.token, rt.body)
		if r.Status != ref.status || r.Error().Code != ref.code {
			t.Errorf("%s with %s: want %d %s, have %s", rt.name, ref.name, ref.status, ref.code, r)
		}
	}
	// A malformed Authorization header is no token at all.
	req, _ := http.NewRequest(rt.method, e.Server.URL+rt.path, nil)
	req.Header.Set("Authorization", "Basic "+admintest.AdminToken)
	if resp, err := e.Server.Client().Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("%s with a Basic header: %v %v", rt.name, resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	r := e.Do(rt.method, rt.path, admintest.ViewerToken, rt.body)
	switch {
	case rt.write && (r.Status != http.StatusForbidden || r.Error().Code != "FORBIDDEN"):
		t.Errorf("%s with the viewer token: want 403 FORBIDDEN, have %s", rt.name, r)
	case !rt.write && r.Status != rt.ok:
		t.Errorf("%s with the viewer token: want %d, have %s", rt.name, rt.ok, r)
	}
	if after := e.Snapshot(all...); after != before {
		t.Errorf("%s: a refused caller changed something:\nbefore %s\nafter  %s", rt.name, before, after)
	}
	if r := e.Do(rt.method, rt.path, admintest.AdminToken, rt.body); r.Status != rt.ok {
		t.Errorf("%s with the merchandiser token: want %d, have %s", rt.name, rt.ok, r)
	}
}
