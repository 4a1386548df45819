package app_test

import (
	"testing"

	"github.com/flashsale/platform/internal/apitest"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// Every operation the spec secures, the table read from the spec itself (history
// included): no token is 401, the viewer's token on an operation for merchandisers
// alone 403, a role the operation lists passes.
func TestEverySecuredOperationHoldsItsRole(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("roles-spec")
	e.Create(id)
	apitest.CheckRoles(t, apitest.PromoAdmin, apitest.RoleCheck{
		Tokens: map[string]string{"merchandiser": admintest.AdminToken, "viewer": admintest.ViewerToken},
		Params: map[string]string{"promoId": id, "type": "1"},
		Bodies: map[string]any{
			"POST /v1/promotions":                       e.Spec(uid("roles-spec-new")),
			"PATCH /v1/promotions/{promoId}/{type}":     map[string]any{"total": 50},
			"POST /v1/promotions/{promoId}/{type}/stop": map[string]any{"reason": "roles"},
		},
		Do: func(method, path, token string, body any) (int, string) {
			r := e.Do(method, path, token, body)
			return r.Status, r.String()
		},
	})
}
