package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
)

// The load's grabs go out through loadgen with the headers a careful checkout
// service sends, and their answers read as before: result, else code, else status.
func TestSendNumbersGrabAttemptsAndReadsTheAnswer(t *testing.T) {
	var got http.Header
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		switch r.URL.Path {
		case "/v1/grab":
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"result":"GRANTED","items":[{"promoId":"p","type":1,"amount":12}]}`)
		case "/v1/grab/x/cancel":
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"code":"NOT_FOUND","message":"no such grab"}`)
		default:
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	l := newLoad(srv.URL, "tok", "run", 1)

	r := l.send("/v1/grab", []byte(`{"requestId":"x"}`), 3)
	if r.status != 200 || r.result != "GRANTED" || r.amounts[promo.Key("p", 1)] != 12 {
		t.Fatalf("grab reply %+v", r)
	}
	if got.Get("Authorization") != "Bearer tok" || got.Get("X-Grab-Attempt") != "3" || got.Get("Content-Type") != "application/json" || body != `{"requestId":"x"}` {
		t.Fatalf("grab sent with %v, body %q", got, body)
	}
	r = l.send("/v1/grab/x/cancel", []byte(`{}`), 1)
	if r.status != 404 || r.result != "NOT_FOUND" || r.message != "no such grab" || got.Get("X-Grab-Attempt") != "" {
		t.Fatalf("cancel reply %+v, headers %v", r, got)
	}
	if r = l.send("/elsewhere", []byte(`{}`), 1); r.result != "HTTP_502" {
		t.Fatalf("bare 502 reply %+v", r)
	}
	srv.Close()
	l.client.Timeout = time.Second
	if r = l.send("/v1/grab", []byte(`{}`), 1); r.status != 0 || r.result != "" {
		t.Fatalf("transport error reply %+v", r)
	}
}
