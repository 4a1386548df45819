package httpx

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// A matched route, with or without wildcards, and a redirect reach their handler
// as the mux itself serves them: the same status, Location, Pattern and path values.
func TestRouteFallbackServesMatchedRoutesAsTheMux(t *testing.T) {
	t.Parallel()
	type seen struct {
		status            int
		location, pattern string
		id, other         string
	}
	mux := http.NewServeMux()
	var got seen
	note := func(w http.ResponseWriter, r *http.Request) {
		got.pattern, got.id = r.Pattern, r.PathValue("requestId")
		r.SetPathValue("other", "set")
		got.other = r.PathValue("other")
		w.WriteHeader(http.StatusNoContent)
	}
	mux.HandleFunc("POST /v1/grab", note)
	mux.HandleFunc("POST /v1/grab/{requestId}/cancel", note)
	mux.HandleFunc("GET /tree/", note)
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/grab"},
		{"POST", "/v1/grab/r-1/cancel"},
		{"POST", "/v1//grab"},
		{"GET", "/tree"},
		{"GET", "/tree/leaf"},
	} {
		serve := func(h http.Handler) seen {
			got = seen{}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
			got.status, got.location = rec.Code, rec.Header().Get("Location")
			return got
		}
		if have, want := serve(RouteFallback(mux)), serve(mux); have != want {
			t.Errorf("%s %s: served %+v, the mux %+v", c.method, c.path, have, want)
		}
	}
}

// BenchmarkRouteFallback is the route lookup of a matched request:
// go test -bench RouteFallback -benchmem ./internal/httpx
func BenchmarkRouteFallback(b *testing.B) {
	mux := http.NewServeMux()
	nothing := func(http.ResponseWriter, *http.Request) {}
	for _, p := range []string{"POST /v1/grab", "POST /v1/grab/{requestId}/cancel", "POST /v1/grab/{requestId}/confirm",
		"GET /v1/promotions/{promoId}/{type}/status", "GET /openapi.yaml"} {
		mux.HandleFunc(p, nothing)
	}
	h := RouteFallback(mux)
	r := httptest.NewRequest("POST", "/v1/grab", nil)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(discard{}, r)
	}
}
