package apitest_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/flashsale/platform/internal/apitest"
)

// The table comes from the spec: every operation with a security requirement, and
// only those (status and the meta routes have none).
func TestSecuredOpsAreTheSpecs(t *testing.T) {
	t.Parallel()
	for service, want := range map[string][]string{
		apitest.GrabService: {"POST /v1/grab", "POST /v1/grab/{requestId}/cancel", "POST /v1/grab/{requestId}/confirm"},
		apitest.PromoAdmin: {"DELETE /v1/promotions/{promoId}/{type}", "GET /v1/promotions", "GET /v1/promotions/{promoId}/{type}",
			"GET /v1/promotions/{promoId}/{type}/history", "GET /v1/promotions/{promoId}/{type}/timeline", "GET /v1/proposals",
			"GET /v1/proposals/{id}", "GET /v1/switches", "GET /v1/switches/history", "GET /v1/whoami", "PATCH /v1/promotions/{promoId}/{type}",
			"POST /v1/promotions", "POST /v1/promotions/{promoId}/{type}/stop", "POST /v1/proposals/{id}/approve",
			"POST /v1/proposals/{id}/reject", "PUT /v1/switches"},
	} {
		ops, err := apitest.SecuredOps(service)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, op := range ops {
			got = append(got, op.Op())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: secured operations %v, want %v", service, got, want)
		}
	}
}

// A service that lets one operation through without its role, or with none, is
// reported; one that holds every operation to its roles is not.
func TestCheckRolesFindsAnOperationReachableWithoutItsRole(t *testing.T) {
	t.Parallel()
	tokens := map[string]string{"checkout": "c", "viewer": "v"}
	check := func(leak string) []string {
		rec := &recorder{}
		apitest.CheckRoles(rec, apitest.GrabService, apitest.RoleCheck{
			Tokens: tokens,
			Params: map[string]string{"requestId": "r1"},
			Bodies: map[string]any{"POST /v1/grab": map[string]any{}, "POST /v1/grab/{requestId}/cancel": map[string]any{},
				"POST /v1/grab/{requestId}/confirm": map[string]any{}},
			Do: func(method, path, token string, _ any) (int, string) {
				switch {
				case strings.HasSuffix(path, leak):
					return http.StatusOK, ""
				case token == "":
					return http.StatusUnauthorized, ""
				case token != "c":
					return http.StatusForbidden, ""
				}
				return http.StatusOK, ""
			},
		})
		return rec.errs
	}
	if errs := check("/none"); len(errs) != 0 {
		t.Errorf("a service holding every role reported: %v", errs)
	}
	if errs := check("/confirm"); len(errs) != 2 {
		t.Errorf("confirm open to anyone: %d reports %v, want 2 (no token, viewer)", len(errs), errs)
	}
	rec := &recorder{}
	apitest.CheckRoles(rec, apitest.GrabService, apitest.RoleCheck{Tokens: tokens, Do: func(string, string, string, any) (int, string) { return 0, "" }})
	if len(rec.errs) != 3 {
		t.Errorf("no params nor bodies: %d reports %v, want one per operation", len(rec.errs), rec.errs)
	}
}
