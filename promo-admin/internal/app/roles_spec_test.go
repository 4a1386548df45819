package app_test

import (
	"path/filepath"
	"testing"

	"github.com/flashsale/platform/configcenter"

	"github.com/flashsale/platform/internal/apitest"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// Every operation the spec secures, the table read from the spec itself (history,
// timeline and on-call's switches included): no token is 401, a role the operation
// does not list 403 (the viewer's on an operation for merchandisers, the
// merchandiser's on on-call's PUT /v1/switches, the merchandiser's on an approval), a
// role it lists passes. Approval is off here: the queue's routes answer APPROVAL_OFF
// to the roles they list.
func TestEverySecuredOperationHoldsItsRole(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{Switches: configcenter.FileSource{Path: filepath.Join(t.TempDir(), "switches.json")}})
	id := uid("roles-spec")
	e.Create(id)
	apitest.CheckRoles(t, apitest.PromoAdmin, apitest.RoleCheck{
		Tokens: map[string]string{"merchandiser": admintest.AdminToken, "viewer": admintest.ViewerToken, "oncall": admintest.OnCallToken,
			"approver": admintest.ApproverToken},
		Params: map[string]string{"promoId": id, "type": "1", "id": "1"},
		Bodies: map[string]any{
			"POST /v1/promotions":                       e.Spec(uid("roles-spec-new")),
			"PATCH /v1/promotions/{promoId}/{type}":     map[string]any{"total": 50},
			"POST /v1/promotions/{promoId}/{type}/stop": map[string]any{"reason": "roles"},
			"PUT /v1/switches":                          map[string]any{"document": map[string]any{"grabEnabled": true}, "ifMd5": ""},
			"POST /v1/proposals/{id}/reject":            map[string]any{"reason": "roles"},
		},
		Do: func(method, path, token string, body any) (int, string) {
			r := e.Do(method, path, token, body)
			return r.Status, r.String()
		},
	})
}
