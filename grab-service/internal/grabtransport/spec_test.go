package grabtransport_test

import (
	"strings"
	"testing"

	"github.com/flashsale/platform/api"
)

// grab-service serves the contract it was built with, and the ops routes beside it
// answer as the contract says (the validator of env_test.go checks the bodies).
func TestServesItsContractAndTheOpsRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("GET", "/openapi.yaml", "", nil)
	if r.status != 200 || r.header.Get("Content-Type") != api.ContentType || r.raw != string(api.OpenAPI) {
		t.Errorf("GET /openapi.yaml: %d %v, %d bytes (want the %d of api/openapi.yaml)", r.status, r.header, len(r.raw), len(api.OpenAPI))
	}
	e.do("GET", "/v1/promotions/none-"+e.suffix+"/1/status", "", nil) // a route counted in /metrics
	for path, want := range map[string]string{"/healthz": `"status":"ok"`, "/readyz": `"status":"ready"`} {
		if r := e.do("GET", path, "", nil); r.status != 200 || !strings.Contains(r.raw, want) {
			t.Errorf("GET %s: %d %.300s", path, r.status, r.raw)
		}
	}
	// Metrics and profiles are the ops listener's alone.
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		if r := e.do("GET", path, "", nil); r.status != 404 {
			t.Errorf("the API's listener answers GET %s: %d", path, r.status)
		}
	}
	for path, want := range map[string]string{"/metrics": "flashsale_grab_http_requests_total", "/readyz": `"status":"ready"`} {
		if code, body := e.opsGet(path); code != 200 || !strings.Contains(body, want) {
			t.Errorf("ops listener GET %s: %d %.300s", path, code, body)
		}
	}
	if r := e.do("GET", "/v1/no-such-route", "", nil); r.status != 404 || r.err.Code != "NOT_FOUND" {
		t.Errorf("unknown route: %d %s", r.status, r.raw)
	}
}
