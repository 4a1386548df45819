package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/tools/checker"
)

// The load's grabs go out through the checkout client with the headers a careful
// checkout service sends, and their final answers read as the checker wants
// them: result, else code, else status; Unknown when no definite answer came.
func TestLoadSendsThroughTheClientAndReadsFinalAnswers(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	var bodies []string
	answers := map[string][]func(w http.ResponseWriter){
		"/v1/grab": {
			func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) },
			func(w http.ResponseWriter) {
				_, _ = io.WriteString(w, `{"requestId":"r1","result":"GRANTED","items":[{"promoId":"p","type":1,"num":1,"amount":12}]}`)
			},
		},
		"/v1/grab/r1/cancel": {func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"code":"NOT_FOUND","message":"no such grab"}`)
		}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r.Header.Clone()), append(bodies, string(b))
		next := answers[r.URL.Path]
		if len(next) > 0 {
			answers[r.URL.Path] = next[1:]
		}
		mu.Unlock()
		if len(next) == 0 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		next[0](w)
	}))
	defer srv.Close()
	l, err := newLoad(srv.URL, "tok", "run", 1)
	if err != nil {
		t.Fatal(err)
	}
	req := &checker.Request{RequestID: "r1", Pin: "u1", IP: "10.1.0.1", Items: []checker.Item{{PromoID: "p", Type: 1, Num: 1}}}

	r, attempts := l.grab(req, false)
	if r.status != 200 || r.result != "GRANTED" || r.amounts[promo.Key("p", 1)] != 12 || attempts != 2 {
		t.Fatalf("grab reply %+v after %d attempts", r, attempts)
	}
	want := `{"requestId":"r1","pin":"u1","ip":"10.1.0.1","items":[{"promoId":"p","type":1,"num":1}]}`
	for i, h := range got {
		if h.Get("Authorization") != "Bearer tok" || h.Get("X-Grab-Attempt") != []string{"1", "2"}[i] || h.Get("Content-Type") != "application/json" || bodies[i] != want {
			t.Fatalf("grab send %d with %v, body %q", i+1, h, bodies[i])
		}
	}
	if string(grabBody(req)) != want {
		t.Fatalf("grabBody %s, want the body sent %s", grabBody(req), want)
	}
	r, _ = l.cancelGrab(req, "")
	if r.status != 404 || r.result != "NOT_FOUND" || r.message != "no such grab" || got[2].Get("X-Grab-Attempt") != "" {
		t.Fatalf("cancel reply %+v, headers %v", r, got[2])
	}

	// 502s until the budget runs out: the grab may stand.
	l.budget = 300 * time.Millisecond
	if r, _ = l.grab(&checker.Request{RequestID: "r2", Pin: "u2", IP: "10.1.0.2", Items: req.Items}, false); r.result != checker.Unknown || r.status != 502 {
		t.Fatalf("grab answered 502 throughout: %+v", r)
	}
	// No service at all: no answer, nothing known.
	srv.Close()
	if r, _ = l.grab(req, true); r.status != 0 || r.result != checker.Unknown {
		t.Fatalf("transport error reply %+v", r)
	}
}
