// Package apitest holds the services' component tests to their contract,
// api/openapi.yaml: Wrap validates every request a test sends and every answer it
// gets against the spec, and Main fails the suite when an operation was reached by
// no test. A request the spec refuses is a violation only when the service does
// not refuse it with a 4xx, as tests send bad requests on purpose (docs/design.md,
// "Scripts and keys", says what is checked). Unspecified paths are not checked.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/flashsale/platform/api"
)

// The services, as the spec's tags name them.
const (
	GrabService = "grab-service"
	PromoAdmin  = "promo-admin"
)

// Unspecified are the path prefixes the spec leaves out of its scope (its
// info.description says why): promo-admin's console pages and grab-service's pprof.
var Unspecified = []string{"/console/", "/debug/pprof/"}

// Reporter is what Wrap reports violations to: a *testing.T, or a recorder.
type Reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// Validator checks one service's requests and answers against the spec, and counts
// which operations were exercised. It is safe for concurrent use.
type Validator struct {
	service  string
	router   routers.Router
	errorDoc *openapi3.Schema
	ops      map[string][]int // "METHOD /path" -> statuses the spec lists

	mu   sync.Mutex
	hits map[string]map[int]int // operation -> status answered -> count
}

var (
	validatorsMu sync.Mutex
	validators   = map[string]*Validator{}
)

// For returns the process's validator of service, loading the spec on first use. A
// spec that does not load or names no operation of service panics: no test of the
// service can be checked against it.
func For(service string) *Validator {
	validatorsMu.Lock()
	defer validatorsMu.Unlock()
	if v, ok := validators[service]; ok {
		return v
	}
	v, err := New(service, api.OpenAPI)
	if err != nil {
		panic("apitest: " + err.Error())
	}
	validators[service] = v
	return v
}

// New builds a validator of service's operations in spec (For uses api.OpenAPI).
func New(service string, spec []byte) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("load the spec: %w", err)
	}
	ctx := context.Background()
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("the spec is not valid OpenAPI: %w", err)
	}
	v := &Validator{service: service, ops: map[string][]int{}, hits: map[string]map[int]int{}}
	// Keep only the service's operations, so that a route of the other service is
	// not found here (the service answers it 404).
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if !hasTag(op, service) {
				item.SetOperation(method, nil)
				continue
			}
			var statuses []int
			for code := range op.Responses.Map() {
				var n int
				if _, err := fmt.Sscanf(code, "%d", &n); err == nil {
					statuses = append(statuses, n)
				}
			}
			sort.Ints(statuses)
			v.ops[method+" "+path] = statuses
		}
		if len(item.Operations()) == 0 {
			doc.Paths.Delete(path)
		}
	}
	if len(v.ops) == 0 {
		return nil, fmt.Errorf("no operation of the spec is tagged %q", service)
	}
	// Route by path alone: the tests' servers listen wherever they are put.
	doc.Servers = nil
	if v.router, err = gorillamux.NewRouter(doc); err != nil {
		return nil, fmt.Errorf("route the spec: %w", err)
	}
	errRef := doc.Components.Schemas["Error"]
	if errRef == nil || errRef.Value == nil {
		return nil, errors.New("the spec has no components/schemas/Error")
	}
	v.errorDoc = errRef.Value
	return v, nil
}

func hasTag(op *openapi3.Operation, tag string) bool {
	for _, t := range op.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

// options are kin-openapi's, the same for every check.
var options = func() *openapi3filter.Options {
	o := &openapi3filter.Options{
		IncludeResponseStatus: true, // a status the operation does not list is a violation
		SkipSettingDefaults:   true,
		// The security schemes are bearer tokens: a request without one is refused
		// by the spec as by the service. Which token holds which role is the
		// service's business, checked by its own tests.
		AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
			auth := in.RequestValidationInput.Request.Header.Get("Authorization")
			if token, ok := strings.CutPrefix(auth, "Bearer "); !ok || token == "" {
				return errors.New("no bearer token")
			}
			return nil
		},
	}
	// kin-openapi's own messages append the whole schema and value; the reason, what
	// caused it (the failing branch of an allOf, say) and where it applies are enough
	// to find the field.
	o.WithCustomSchemaErrorFunc(func(err *openapi3.SchemaError) string {
		msg := err.Reason
		if p := err.JSONPointer(); len(p) > 0 {
			msg = fmt.Sprintf("at /%s: %s", strings.Join(p, "/"), msg)
		}
		if err.Origin != nil {
			msg += ": " + err.Origin.Error()
		}
		return msg
	})
	return o
}()

// Check validates one exchange: req and its body as the service received them, and
// the answer's status, headers and body. It returns every violation found, nil for
// none, and counts the operation as exercised.
func (v *Validator) Check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	if unspecified(req.URL.Path) {
		return nil
	}
	ctx := context.Background()
	vr := req.Clone(ctx)
	vr.Body = io.NopCloser(bytes.NewReader(reqBody))
	vr.ContentLength = int64(len(reqBody))
	if vr.Header.Get("Content-Type") == "" && len(reqBody) > 0 {
		// The services read a body as JSON whatever it is labelled (the spec says so).
		vr.Header.Set("Content-Type", "application/json")
	}
	head := vr.Method == http.MethodHead
	if head { // served by the GET operation, without a body
		vr.Method = http.MethodGet
	}
	route, params, err := v.router.FindRoute(vr)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return v.checkUnrouted(http.StatusNotFound, "NOT_FOUND", status, header, body, head)
	case errors.Is(err, routers.ErrMethodNotAllowed):
		return v.checkUnrouted(http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", status, header, body, head)
	case err != nil:
		return fmt.Errorf("routing the request: %w", err)
	}
	v.hit(route.Method+" "+route.Path, status)
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route, Options: options}
	var errs []error
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && (status < 400 || status >= 500) {
		errs = append(errs, fmt.Errorf("the spec refuses this request, yet the service answered %d "+
			"(a request the spec refuses must get a 4xx: the spec or the code accepts too much): %w", status, err))
	}
	if head {
		return errors.Join(errs...)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header, Options: options}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		errs = append(errs, fmt.Errorf("the answer does not match %s %s: %w", route.Method, route.Path, err))
	}
	return errors.Join(errs...)
}

// checkUnrouted checks the answer to a request no operation of the service lists:
// the spec's Error body with the status and code given.
func (v *Validator) checkUnrouted(want int, code string, status int, header http.Header, body []byte, head bool) error {
	what := map[int]string{http.StatusNotFound: "no operation of " + v.service + " has this path",
		http.StatusMethodNotAllowed: "no operation of " + v.service + " has this method on this path"}[want]
	if status != want {
		return fmt.Errorf("%s, yet the service answered %d, not %d %s: a route the service serves is missing from the spec", what, status, want, code)
	}
	if header.Get("X-Request-Id") == "" {
		return fmt.Errorf("%s: the %d answer has no X-Request-Id header", what, status)
	}
	if want == http.StatusMethodNotAllowed && header.Get("Allow") == "" {
		return fmt.Errorf("%s: the 405 answer has no Allow header", what)
	}
	if head {
		return nil
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("%s: the %d answer is not a JSON Error body: %v", what, status, err)
	}
	if err := v.errorDoc.VisitJSON(doc, openapi3.VisitAsResponse()); err != nil {
		return fmt.Errorf("%s: the %d answer is not the spec's Error body: %w", what, status, err)
	}
	if m, _ := doc.(map[string]any); m["code"] != code {
		return fmt.Errorf("%s: the %d answer's code is %v, want %s", what, status, m["code"], code)
	}
	return nil
}

func unspecified(path string) bool {
	for _, p := range Unspecified {
		if strings.HasPrefix(path, p) || path == strings.TrimSuffix(p, "/") {
			return true
		}
	}
	return false
}

func (v *Validator) hit(op string, status int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := v.hits[op]
	if m == nil {
		m = map[int]int{}
		v.hits[op] = m
	}
	m[status]++
}

// Operations lists the service's operations in the spec, as "METHOD /path".
func (v *Validator) Operations() []string {
	out := make([]string, 0, len(v.ops))
	for op := range v.ops {
		out = append(out, op)
	}
	sort.Strings(out)
	return out
}

// Unexercised lists the operations no checked request has reached yet.
func (v *Validator) Unexercised() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for _, op := range v.Operations() {
		if len(v.hits[op]) == 0 {
			out = append(out, op)
		}
	}
	return out
}

// UnseenAnswers lists, per operation exercised, the statuses the spec lists that no
// checked answer had: what the tests never made the service say.
func (v *Validator) UnseenAnswers() map[string][]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string][]int{}
	for op, statuses := range v.ops {
		if len(v.hits[op]) == 0 {
			continue
		}
		for _, s := range statuses {
			if v.hits[op][s] == 0 {
				out[op] = append(out[op], s)
			}
		}
	}
	return out
}

// Wrap returns next with every exchange checked by service's validator (For); each
// violation is reported to t with the method, path, status and kin-openapi's
// message. The request's body is read before next runs, and the answer is kept as
// it is written, so the check is done when next returns, before the client has all
// of the answer: a violation is reported while the test that caused it runs.
func Wrap(t Reporter, service string, next http.Handler) http.Handler {
	v := For(service)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sent := r.Clone(context.Background()) // as received, whatever next does to r
		cw := &captureWriter{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		status, header := cw.result()
		if err := v.Check(sent, body, status, header, cw.body.Bytes()); err != nil {
			t.Helper()
			t.Errorf("api/openapi.yaml (%s): %s %s answered %d: %v", service, sent.Method, sent.URL.RequestURI(), status, err)
		}
	})
}

// captureWriter passes an answer through and keeps a copy: the status, the headers
// as they were sent, and the body.
type captureWriter struct {
	http.ResponseWriter
	status int
	header http.Header
	body   bytes.Buffer
}

func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
		c.header = c.ResponseWriter.Header().Clone()
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *captureWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	c.body.Write(p)
	return c.ResponseWriter.Write(p)
}

// Flush lets streaming handlers flush through the capture.
func (c *captureWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *captureWriter) result() (int, http.Header) {
	if c.status == 0 { // the handler wrote nothing: net/http sends 200
		return http.StatusOK, c.ResponseWriter.Header().Clone()
	}
	return c.status, c.header
}
