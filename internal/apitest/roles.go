package apitest

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/flashsale/platform/api"
)

// Secured is an operation of the spec with a security requirement: the roles (the
// spec's security schemes) any one of which may call it.
type Secured struct {
	Method, Path string // as the spec writes them: "POST", "/v1/grab/{requestId}/cancel"
	Roles        []string
	Body         bool // the operation requires a request body
}

// Op is "METHOD /path", as Validator.Operations names it.
func (s Secured) Op() string { return s.Method + " " + s.Path }

// SecuredOps lists, from api/openapi.yaml, every operation of service that names a
// security requirement (its own or the document's), sorted.
func SecuredOps(service string) ([]Secured, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load the spec: %w", err)
	}
	var out []Secured
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			reqs := doc.Security
			if op.Security != nil {
				reqs = *op.Security
			}
			if !hasTag(op, service) || len(reqs) == 0 {
				continue
			}
			s := Secured{Method: method, Path: path}
			for _, req := range reqs {
				for scheme := range req {
					s.Roles = append(s.Roles, scheme)
				}
			}
			sort.Strings(s.Roles)
			s.Body = op.RequestBody != nil && op.RequestBody.Value != nil && op.RequestBody.Value.Required
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Op() < out[j].Op() })
	return out, nil
}

// RoleCheck is what a service's test gives CheckRoles: the tokens it knows, by role,
// and how to send a well-formed request of every secured operation.
type RoleCheck struct {
	Tokens map[string]string // role (security scheme) -> a token of it the service knows
	Params map[string]string // path parameter -> a well-formed value
	Bodies map[string]any    // Secured.Op() -> a well-formed body, for those that take one
	// Do sends one request (token "" sends none) and returns the answer's status
	// and body.
	Do func(method, path, token string, body any) (int, string)
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// CheckRoles sends every secured operation of service in the spec a well-formed
// request with no token (401), with the token of each known role it does not list
// (403), and with those of the roles it lists (neither): an operation reachable
// without its role, or an operation the test cannot build a request of, fails.
func CheckRoles(t Reporter, service string, c RoleCheck) {
	t.Helper()
	ops, err := SecuredOps(service)
	if err != nil || len(ops) == 0 {
		t.Errorf("the spec's secured operations of %s: %v (%d found)", service, err, len(ops))
		return
	}
	for _, op := range ops {
		path, body, err := c.request(op)
		if err != nil {
			t.Errorf("%s: %v", op.Op(), err)
			continue
		}
		if status, raw := c.Do(op.Method, path, "", body); status != http.StatusUnauthorized {
			t.Errorf("%s with no token: %d %s, want 401", op.Op(), status, raw)
		}
		for role, token := range c.Tokens {
			status, raw := c.Do(op.Method, path, token, body)
			allowed := slices.Contains(op.Roles, role)
			switch {
			case !allowed && status != http.StatusForbidden:
				t.Errorf("%s with a %s token: %d %s, want 403 (the spec allows %v)", op.Op(), role, status, raw, op.Roles)
			case allowed && (status == http.StatusUnauthorized || status == http.StatusForbidden):
				t.Errorf("%s with a %s token: %d %s; the spec allows that role", op.Op(), role, status, raw)
			}
		}
	}
}

// request is op's path with its parameters filled in, and its body.
func (c RoleCheck) request(op Secured) (string, any, error) {
	var missing []string
	path := pathParam.ReplaceAllStringFunc(op.Path, func(m string) string {
		v, ok := c.Params[strings.Trim(m, "{}")]
		if !ok {
			missing = append(missing, m)
		}
		return v
	})
	if len(missing) > 0 {
		return "", nil, fmt.Errorf("no value for the path parameters %v", missing)
	}
	body, ok := c.Bodies[op.Op()]
	if op.Body && !ok {
		return "", nil, fmt.Errorf("the operation takes a body, and the test gives none")
	}
	return path, body, nil
}
