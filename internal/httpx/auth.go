package httpx

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// Role is what a bearer token may do.
type Role string

const (
	RoleCheckout     Role = "checkout"
	RoleMerchandiser Role = "merchandiser"
	RoleViewer       Role = "viewer"
)

// Tokens maps the tokens a service knows to their roles.
type Tokens []struct {
	Token string
	Role  Role
}

// roleOf finds the token's role, comparing every known token in constant time so
// the time taken reveals nothing about how much of a guess matched.
func (ts Tokens) roleOf(token string) (Role, bool) {
	var found Role
	ok := 0
	for _, t := range ts {
		if subtle.ConstantTimeCompare([]byte(t.Token), []byte(token)) == 1 {
			found, ok = t.Role, 1
		}
	}
	return found, ok == 1
}

// Require wraps next so only tokens holding one of roles reach it: a missing or
// unknown token is 401, a known one without the role 403.
func (ts Tokens) Require(next http.Handler, roles ...Role) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		token, found := strings.CutPrefix(auth, "Bearer ")
		if !found || token == "" {
			WriteError(r.Context(), errUnauthorized, w)
			return
		}
		role, known := ts.roleOf(token)
		if !known {
			WriteError(r.Context(), errUnauthorized, w)
			return
		}
		for _, want := range roles {
			if role == want {
				next.ServeHTTP(w, r)
				return
			}
		}
		WriteError(r.Context(), errForbidden, w)
	})
}
