package apitest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/flashsale/platform/api"
	"github.com/flashsale/platform/internal/apitest"
)

// recorder is a Reporter that keeps what Wrap reports, so a test can assert that a
// violation is reported (and that a conforming exchange is not).
type recorder struct {
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// exchange sends one request through Wrap to a handler answering status, body and
// header, and returns what Wrap reported.
func exchange(service, method, path, reqBody string, reqHeader http.Header, status int, header http.Header, body string) []string {
	rec := &recorder{}
	h := apitest.Wrap(rec, service, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	req := httptest.NewRequest(method, path, strings.NewReader(reqBody))
	for k, v := range reqHeader {
		req.Header[k] = v
	}
	h.ServeHTTP(httptest.NewRecorder(), req)
	return rec.errs
}

func jsonHeader(extra ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json; charset=utf-8"}, "X-Request-Id": {"abc"}}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	return h
}

var checkout = http.Header{"Authorization": {"Bearer t"}}

const (
	grabBody = `{"requestId":"r1","pin":"p","ip":"10.0.0.1","items":[{"promoId":"A","type":1,"num":1}]}`
	granted  = `{"requestId":"r1","result":"GRANTED","items":[{"promoId":"A","type":1,"num":1,"remaining":9}]}`
	promo    = `{"promoId":"A","type":1,"total":10,"perPinLimit":0,"perIpLimit":0,"maxPerGrab":1,` +
		`"startAt":"2030-01-01T00:00:00Z","endAt":"2030-01-02T00:00:00Z","key":"C_A_1","shard":14,"state":"SCHEDULED",` +
		`"remaining":10,"granted":0,"createdAt":"2029-12-01T00:00:00.123Z","updatedAt":"2029-12-01T00:00:00.123Z"}`
)

// The done-criterion of the contract test: a field the code writes and the spec does
// not list fails the test that saw it, at any depth of an answer.
func TestAFieldTheSpecDoesNotListIsReported(t *testing.T) {
	t.Parallel()
	withField := func(body, at, field string) string { return strings.Replace(body, at, at+field, 1) }
	cases := []struct {
		name, service, method, path, reqBody string
		status                               int
		body                                 string
		violation                            string // "" for none
	}{
		{"grab answer as the spec says", apitest.GrabService, "POST", "/v1/grab", grabBody, 200, granted, ""},
		{"grab answer with a field more", apitest.GrabService, "POST", "/v1/grab", grabBody, 200,
			withField(granted, `{"requestId":"r1",`, `"price":1,`), "price"},
		{"grab answer with an item field more", apitest.GrabService, "POST", "/v1/grab", grabBody, 200,
			withField(granted, `"remaining":9`, `,"sku":"x"`), "sku"},
		{"promotion as the spec says", apitest.PromoAdmin, "GET", "/v1/promotions/A/1", "", 200, promo, ""},
		{"promotion with a field more", apitest.PromoAdmin, "GET", "/v1/promotions/A/1", "", 200,
			withField(promo, `"granted":0,`, `"reserved":0,`), "reserved"},
		{"error with a field more", apitest.PromoAdmin, "GET", "/v1/promotions/A/1", "", 404,
			`{"code":"NOT_FOUND","message":"no such promotion","hint":"x"}`, "hint"},
	}
	for _, c := range cases {
		errs := exchange(c.service, c.method, c.path, c.reqBody, checkout, c.status, jsonHeader(), c.body)
		switch {
		case c.violation == "" && len(errs) > 0:
			t.Errorf("%s: reported %q", c.name, errs)
		case c.violation != "" && (len(errs) != 1 || !strings.Contains(errs[0], c.violation)):
			t.Errorf("%s: want one report naming %q, have %q", c.name, c.violation, errs)
		}
	}
}

// Answers are checked against the operation's own: its statuses, their results and
// codes, their required headers.
func TestAnswersAreHeldToTheirOperation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, service, method, path, reqBody string
		status                               int
		header                               http.Header
		body                                 string
		violation                            string
	}{
		{"a status the operation does not list", apitest.PromoAdmin, "GET", "/healthz", "", 201, jsonHeader(), `{"status":"ok"}`, "status is not supported"},
		{"a result another status carries", apitest.GrabService, "POST", "/v1/grab", grabBody, 200, jsonHeader(),
			`{"requestId":"r1","result":"SOLD_OUT","failedItem":0}`, "result"},
		{"a refusal", apitest.GrabService, "POST", "/v1/grab", grabBody, 409, jsonHeader(),
			`{"requestId":"r1","result":"SOLD_OUT","failedItem":0}`, ""},
		{"an error code the status does not carry", apitest.PromoAdmin, "POST", "/v1/promotions/A/1/stop", "", 409, jsonHeader(),
			`{"code":"ALREADY_EXISTS","message":"m"}`, "code"},
		{"no X-Request-Id", apitest.GrabService, "GET", "/healthz", "", 200,
			http.Header{"Content-Type": {"application/json"}}, `{"status":"ok"}`, "X-Request-Id"},
		{"429 without Retry-After", apitest.GrabService, "POST", "/v1/grab", grabBody, 429, jsonHeader(),
			`{"requestId":"r1","result":"RATE_LIMITED"}`, "Retry-After"},
		{"429 with Retry-After", apitest.GrabService, "POST", "/v1/grab", grabBody, 429, jsonHeader("Retry-After", "1"),
			`{"requestId":"r1","result":"RATE_LIMITED"}`, ""},
		{"the redirect of /", apitest.PromoAdmin, "GET", "/", "", 302, http.Header{"Location": {"/console/"}, "X-Request-Id": {"a"}}, "", ""},
		{"a redirect elsewhere", apitest.PromoAdmin, "GET", "/", "", 302, http.Header{"Location": {"/elsewhere"}, "X-Request-Id": {"a"}}, "", "Location"},
	}
	for _, c := range cases {
		errs := exchange(c.service, c.method, c.path, c.reqBody, checkout, c.status, c.header, c.body)
		switch {
		case c.violation == "" && len(errs) > 0:
			t.Errorf("%s: reported %q", c.name, errs)
		case c.violation != "" && (len(errs) != 1 || !strings.Contains(errs[0], c.violation)):
			t.Errorf("%s: want one report naming %q, have %q", c.name, c.violation, errs)
		}
	}
}

// A request the spec refuses must be refused with a 4xx; its answer is still
// checked like any other.
func TestARequestTheSpecRefusesMustGetA4xx(t *testing.T) {
	t.Parallel()
	noIP := `{"requestId":"r1","pin":"p","items":[{"promoId":"A","type":1,"num":1}]}`
	invalid := `{"code":"INVALID_REQUEST","message":"required","field":"ip"}`
	cases := []struct {
		name, reqBody string
		reqHeader     http.Header
		status        int
		body          string
		violation     string
	}{
		{"refused with the spec's 400", noIP, checkout, 400, invalid, ""},
		{"refused with a 400 the spec does not know", noIP, checkout, 400, `{"error":"bad"}`, "error"},
		{"accepted", noIP, checkout, 200, granted, "the spec refuses this request"},
		{"answered with a 5xx", noIP, checkout, 500, `{"code":"INTERNAL","message":"m"}`, "the spec refuses this request"},
		{"no token, refused", grabBody, nil, 401, `{"code":"UNAUTHORIZED","message":"m"}`, ""},
		{"no token, accepted", grabBody, nil, 200, granted, "the spec refuses this request"},
		{"a bad attempt header, refused", grabBody, http.Header{"Authorization": {"Bearer t"}, "X-Grab-Attempt": {"0"}}, 400,
			`{"code":"INVALID_REQUEST","message":"m","field":"X-Grab-Attempt"}`, ""},
		{"a bad attempt header, accepted", grabBody, http.Header{"Authorization": {"Bearer t"}, "X-Grab-Attempt": {"0"}}, 200,
			granted, "X-Grab-Attempt"},
	}
	for _, c := range cases {
		errs := exchange(apitest.GrabService, "POST", "/v1/grab", c.reqBody, c.reqHeader, c.status, jsonHeader(), c.body)
		switch {
		case c.violation == "" && len(errs) > 0:
			t.Errorf("%s: reported %q", c.name, errs)
		case c.violation != "" && (len(errs) != 1 || !strings.Contains(errs[0], c.violation)):
			t.Errorf("%s: want one report naming %q, have %q", c.name, c.violation, errs)
		}
	}
}

// A path or method the service's operations do not list must be answered with the
// spec's 404 or 405 Error; anything else is a route the spec is missing.
func TestRoutesTheSpecDoesNotListMustBeRefused(t *testing.T) {
	t.Parallel()
	notFound := `{"code":"NOT_FOUND","message":"no route"}`
	cases := []struct {
		name, service, method, path string
		status                      int
		header                      http.Header
		body                        string
		violation                   string
	}{
		{"unknown path refused", apitest.GrabService, "GET", "/v2/x", 404, jsonHeader(), notFound, ""},
		{"unknown path served", apitest.GrabService, "GET", "/v2/x", 200, jsonHeader(), `{}`, "missing from the spec"},
		{"unknown path, plain text", apitest.GrabService, "GET", "/v2/x", 404, http.Header{"X-Request-Id": {"a"}}, "404 page not found", "JSON"},
		{"the other service's route", apitest.PromoAdmin, "POST", "/v1/grab", 404, jsonHeader(), notFound, ""},
		{"the other service's route served", apitest.PromoAdmin, "POST", "/v1/grab", 200, jsonHeader(), granted, "missing from the spec"},
		{"unknown method refused", apitest.PromoAdmin, "PUT", "/v1/promotions", 405, jsonHeader("Allow", "GET, POST"),
			`{"code":"METHOD_NOT_ALLOWED","message":"m"}`, ""},
		{"unknown method without Allow", apitest.PromoAdmin, "PUT", "/v1/promotions", 405, jsonHeader(),
			`{"code":"METHOD_NOT_ALLOWED","message":"m"}`, "Allow"},
		{"out of the spec's scope", apitest.PromoAdmin, "GET", "/console/console.js", 200, http.Header{}, "x", ""},
	}
	for _, c := range cases {
		errs := exchange(c.service, c.method, c.path, "", checkout, c.status, c.header, c.body)
		switch {
		case c.violation == "" && len(errs) > 0:
			t.Errorf("%s: reported %q", c.name, errs)
		case c.violation != "" && (len(errs) != 1 || !strings.Contains(errs[0], c.violation)):
			t.Errorf("%s: want one report naming %q, have %q", c.name, c.violation, errs)
		}
	}
}

// The spec is valid OpenAPI, every operation belongs to a service, and every answer
// body schema is closed, so that the validator can catch a field the spec lacks.
func TestSpecIsValidAndClosed(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if len(op.Tags) == 0 {
				t.Errorf("%s %s: no tag names the service that serves it", method, path)
			}
			for _, tag := range op.Tags {
				if tag != apitest.GrabService && tag != apitest.PromoAdmin {
					t.Errorf("%s %s: tag %q is not a service", method, path, tag)
				}
			}
			for code, resp := range op.Responses.Map() {
				for mime, mt := range resp.Value.Content {
					if mime != "application/json" {
						continue
					}
					for _, open := range openObjects(mt.Schema, "", map[*openapi3.Schema]bool{}) {
						t.Errorf("%s %s %s: the object at %q does not set additionalProperties: false", method, path, code, open)
					}
				}
			}
		}
	}
	for _, s := range []string{apitest.GrabService, apitest.PromoAdmin} {
		if len(apitest.For(s).Operations()) == 0 {
			t.Errorf("%s has no operation", s)
		}
	}
}

// openObjects lists the object schemas under ref that accept properties they do not
// name. A schema of allOf or oneOf branches is closed when its branches are; a map
// (additionalProperties given a schema) is closed when its values are.
func openObjects(ref *openapi3.SchemaRef, at string, seen map[*openapi3.Schema]bool) []string {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return nil
	}
	s := ref.Value
	seen[s] = true
	var out []string
	for _, branch := range append(append([]*openapi3.SchemaRef{}, s.AllOf...), s.OneOf...) {
		out = append(out, openObjects(branch, at, seen)...)
	}
	if s.Type.Is("object") {
		switch ap := s.AdditionalProperties; {
		case ap.Schema != nil:
			out = append(out, openObjects(ap.Schema, at+"/*", seen)...)
		case ap.Has == nil || *ap.Has:
			out = append(out, at+"/")
		}
	}
	for name, p := range s.Properties {
		out = append(out, openObjects(p, at+"/"+name, seen)...)
	}
	if s.Items != nil {
		out = append(out, openObjects(s.Items, at+"/[]", seen)...)
	}
	return out
}
