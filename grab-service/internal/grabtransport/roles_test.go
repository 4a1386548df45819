package grabtransport_test

import (
	"testing"

	"github.com/flashsale/platform/internal/apitest"
)

// Every operation the spec secures, the table read from the spec itself: no token
// is 401, a token of a role the operation does not list 403, its own role passes.
func TestEverySecuredOperationHoldsItsRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.promotion("roles", spec{total: 10})
	rid := e.rid("roles-1")
	apitest.CheckRoles(t, apitest.GrabService, apitest.RoleCheck{
		Tokens: map[string]string{"checkout": checkoutToken, "viewer": "viewer"},
		Params: map[string]string{"requestId": rid},
		Bodies: map[string]any{
			"POST /v1/grab":                     grabBody(rid, "pin-roles", "10.8.0.1", id, 1),
			"POST /v1/grab/{requestId}/cancel":  map[string]any{"pin": "pin-roles"},
			"POST /v1/grab/{requestId}/confirm": map[string]any{"pin": "pin-roles"},
		},
		Do: func(method, path, token string, body any) (int, string) {
			a := e.do(method, path, token, body)
			return a.status, a.raw
		},
	})
}
