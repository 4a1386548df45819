package httpx

import (
	"context"
	"crypto/sha256"
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
	// RoleApprover approves or rejects what merchandisers propose when promo-admin
	// requires approval (docs/CONTRACT.md, "Approval").
	RoleApprover Role = "approver"
)

// Tokens maps the tokens a service knows to their roles. Name says whose token it
// is, for the audit trail (svc.Tokens gives every token one).
type Tokens []struct {
	Token string
	Role  Role
	Name  string
}

// Actor is who made a request: the name and role of the token it carried.
type Actor struct {
	Name string
	Role Role
}

// ActorFrom is the actor Require let through; false outside a guarded route.
func ActorFrom(ctx context.Context) (Actor, bool) {
	if s := scopeOf(ctx); s != nil && s.actor.Role != "" {
		return s.actor, true
	}
	return Actor{}, false
}

// knownToken is a known token's digest, taken once when a route is guarded, and
// the actor it names: a request then hashes only the token it presents.
type knownToken struct {
	digest [sha256.Size]byte
	actor  Actor
}

// knownTokens is the digests of Tokens, what a guarded route compares against.
type knownTokens []knownToken

func (ts Tokens) digests() knownTokens {
	known := make(knownTokens, len(ts))
	for i, t := range ts {
		known[i] = knownToken{digest: tokenDigest(t.Token), actor: Actor{Name: t.Name, Role: t.Role}}
	}
	return known
}

// actorOf finds the token's actor, comparing every known token in constant time
// so the time taken reveals nothing about how much of a guess matched.
func (ks knownTokens) actorOf(token string) (Actor, bool) {
	var found Actor
	ok := 0
	given := tokenDigest(token)
	for i := range ks {
		if digestsEqual(ks[i].digest, given) == 1 {
			found, ok = ks[i].actor, 1
		}
	}
	return found, ok == 1
}

// tokenDigest is what tokens are compared by: digests are all one length, and a
// comparison of unequal lengths returns at once, telling a guess the token's length.
func tokenDigest(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// digestsEqual is 1 when a and b are equal, compared in constant time; a test's
// stand-in sees its inputs. The digests go by value so that the presented one
// stays on the stack whatever the function is.
var digestsEqual = func(a, b [sha256.Size]byte) int { return subtle.ConstantTimeCompare(a[:], b[:]) }

// Require wraps next so only tokens holding one of roles reach it: a missing or
// unknown token is 401, a known one without the role 403.
func (ts Tokens) Require(next http.Handler, roles ...Role) http.Handler {
	known := ts.digests()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		token, found := strings.CutPrefix(auth, "Bearer ")
		if !found || token == "" {
			WriteError(r.Context(), errUnauthorized, w)
			return
		}
		actor, ok := known.actorOf(token)
		if !ok {
			WriteError(r.Context(), errUnauthorized, w)
			return
		}
		for _, want := range roles {
			if actor.Role != want {
				continue
			}
			s := scopeOf(r.Context())
			if s == nil { // a handler served without Serve (a test's): a scope of its own
				s = &scope{Context: r.Context()}
				r = r.WithContext(s)
			}
			s.actor = actor
			next.ServeHTTP(w, r)
			return
		}
		WriteError(r.Context(), errForbidden, w)
	})
}
