package admintransport

import (
	"net/http"

	"github.com/flashsale/platform/internal/httpx"
)

// RouteWhoAmI tells a client whose token it holds, so that a console shows only
// what the role may do instead of guessing from a refused call. It reads the
// actor Require found: nothing behind it, so a plain handler.
const RouteWhoAmI = "GET /v1/whoami"

// WhoAmI is the body of GET /v1/whoami: the token's name and role.
type WhoAmI struct {
	Name string     `json:"name"`
	Role httpx.Role `json:"role"`
}

// whoAmIHandler answers the caller's actor. It is mounted behind every role
// promo-admin knows, so an actor is always there; without one (a mounting
// mistake) it answers 401 rather than an empty identity.
func whoAmIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor, ok := httpx.ActorFrom(r.Context())
		if !ok {
			httpx.WriteError(r.Context(), &httpx.Error{Status: http.StatusUnauthorized, Code: "UNAUTHORIZED",
				Message: "missing or unknown bearer token"}, w)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		httpx.WriteJSON(w, http.StatusOK, WhoAmI{Name: actor.Name, Role: actor.Role})
	})
}
