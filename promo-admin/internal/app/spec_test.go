package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flashsale/platform/api"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// promo-admin serves the contract it was built with, no token needed.
func TestServesItsContract(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	r := e.Do(http.MethodGet, "/openapi.yaml", "", nil)
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != api.ContentType || string(r.Body) != string(api.OpenAPI) {
		t.Errorf("GET /openapi.yaml: %d %v, %d bytes (want the %d of api/openapi.yaml)", r.Status, r.Header, len(r.Body), len(api.OpenAPI))
	}
}

// A merchandiser who types only the host name lands on the console: GET / is a 302
// to /console/ (as api/openapi.yaml says), and only GET / is.
func TestRootRedirectsToTheConsole(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	client := *e.Server.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Get(e.Server.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/" {
		t.Errorf("GET /: %d, Location %q; want 302 to /console/", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Followed, as a browser does: the console's page.
	if r := e.Do(http.MethodGet, "/", "", nil); r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET / followed: %d %v", r.Status, r.Header)
	}
	if r := e.Do(http.MethodPost, "/", admintest.AdminToken, nil); r.Status != http.StatusMethodNotAllowed || r.Error().Code != "METHOD_NOT_ALLOWED" {
		t.Errorf("POST /: %s", r)
	}
	if r := e.Do(http.MethodGet, "/console-typo", "", nil); r.Status != http.StatusNotFound || r.Error().Code != "NOT_FOUND" {
		t.Errorf("GET /console-typo: %s", r)
	}
}
