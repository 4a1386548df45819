package httpx

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A key given twice means two things at once; DecodeBytes refuses it, naming the key
// (found by the fault drills' hostile-input storm: `{"requestId":"a","requestId":"b"}`
// was granted as "b").
func TestDecodeBytesRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	cases := []struct {
		body, field string
	}{
		{`{"promoId":"A","promoId":"B"}`, "promoId"},
		{`{"promoId":"A","rateLimit":{"limit":1,"limit":2}}`, "rateLimit.limit"},
		{`{"list":[{"limit":1},{"limit":2,"limit":3}]}`, "list.limit"},
		{`{"rateLimit":{"limit":1},"rateLimit":null}`, "rateLimit"},
		{`{"list":[],"promoId":"x","list":[{"limit":1}]}`, "list"},
		// Not duplicates: the same key in sibling objects, a value equal to a key.
		{`{"list":[{"limit":1},{"limit":2}],"promoId":"limit"}`, ""},
		{`{"rateLimit":{"limit":1},"list":[{"limit":1}]}`, ""},
		{`{"promoId":"promoId"}`, ""},
	}
	for _, c := range cases {
		var v outer
		err := DecodeBytes([]byte(c.body), &v, false)
		var e *Error
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: unexpected %v", c.body, err)
		case c.field != "" && (!errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Field != c.field || !strings.Contains(e.Message, "duplicate")):
			t.Errorf("%s: want a 400 naming %q as duplicate, have %v", c.body, c.field, err)
		}
	}
}

// Requests matching no route get the contract's Error body, not the mux's plain text.
func TestRouteFallbackAnswersWithTheErrorBody(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/grab", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	h := RouteFallback(mux)
	cases := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"POST", "/v1/grab", 200, "", ""},
		{"GET", "/v1/grab", 405, "METHOD_NOT_ALLOWED", "POST"},
		{"DELETE", "/v1/grab", 405, "METHOD_NOT_ALLOWED", "POST"},
		{"POST", "/v1/nothing", 404, "NOT_FOUND", ""},
		{"POST", "/v1/grab/", 404, "NOT_FOUND", ""},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		body := rec.Body.String()
		if rec.Code != c.status || (c.code != "" && (!strings.Contains(body, `"code":"`+c.code+`"`) || !strings.Contains(body, `"message":"`))) {
			t.Errorf("%s %s: have %d %s, want %d with code %s", c.method, c.path, rec.Code, body, c.status, c.code)
		}
		if c.allow != "" && !strings.Contains(rec.Header().Get("Allow"), c.allow) {
			t.Errorf("%s %s: Allow %q, want %s", c.method, c.path, rec.Header().Get("Allow"), c.allow)
		}
	}
}
