package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestResultOfReadsTopLevelFieldsOnly(t *testing.T) {
	cases := []struct{ body, want string }{
		{`{"requestId":"a","result":"GRANTED","items":[1,2]}`, "GRANTED"},
		{`{"requestId":"a","items":[{"result":"NESTED"}],"result":"SOLD_OUT"}`, "SOLD_OUT"},
		{`{"nested":{"result":"NO","code":"NO"},"code":"RATE_LIMITED","message":"x, \"y\" }"}`, "RATE_LIMITED"},
		{` { "code" : "NOT_FOUND" , "n": -1.5e3, "ok": true, "z": null } `, "NOT_FOUND"},
		{`{"result":"","code":"BAD_REQUEST"}`, "BAD_REQUEST"},
		{`{"result":"A\u0042"}`, "AB"}, // an escape: encoding/json decides
		{`{"message":"no result here"}`, ""},
		{`not json`, ""},
		{``, ""},
		{`[{"result":"GRANTED"}]`, ""},
	}
	for _, c := range cases {
		if got := resultOf([]byte(c.body)); got != c.want {
			t.Errorf("resultOf(%s) = %q, want %q", c.body, got, c.want)
		}
	}
}

func TestResultOfDoesNotAllocateForAKnownResult(t *testing.T) {
	body := []byte(`{"requestId":"bench","result":"SOLD_OUT","failedItem":0,"message":"answered from the local SOLD_OUT cache"}` + "\n")
	if n := testing.AllocsPerRun(100, func() { _ = resultOf(body) }); n != 0 {
		t.Errorf("%.0f allocations per answer, want 0", n)
	}
}

// TestRunSendsWhatDoSends holds the lean connection to net/http's request: method,
// path, headers and body as the server sees them.
func TestRunSendsWhatDoSends(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, fmt.Sprintf("%s %s auth=%q attempt=%q type=%q len=%d body=%s",
			r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("X-Grab-Attempt"),
			r.Header.Get("Content-Type"), r.ContentLength, b))
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"result":"SOLD_OUT"}`))
	}))
	defer srv.Close()
	call := Call{Method: "POST", Path: "/v1/grab?x=1", Token: "tok", Body: []byte(`{"a":1}`), Attempt: 1}
	Run(context.Background(), Config{BaseURL: srv.URL, Concurrency: 1, Calls: 1}, func(int) Call { return call }, nil)
	Do(context.Background(), srv.Client(), srv.URL, call)
	mapped := call
	mapped.Body = map[string]int{"a": 1}
	Run(context.Background(), Config{BaseURL: srv.URL, Concurrency: 1, Calls: 1}, func(int) Call { return mapped }, nil)
	if len(seen) != 3 || seen[0] != seen[1] || seen[0] != seen[2] {
		t.Fatalf("requests differ:\n%s", strings.Join(seen, "\n"))
	}
	if want := `POST /v1/grab?x=1 auth="Bearer tok" attempt="1" type="application/json" len=7 body={"a":1}`; seen[0] != want {
		t.Errorf("got  %s\nwant %s", seen[0], want)
	}
}

func TestRunReadsChunkedAndClosedAnswers(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 3 {
		case 0: // chunked: flushed before the handler ends
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"items":[{"result":"X"}],`))
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte(`"result":"GRANTED"}`))
		case 1: // the server closes the connection after the answer
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"result":"SOLD_OUT"}`))
		default:
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"code":"RATE_LIMITED"}`))
		}
	}))
	defer srv.Close()
	answers := Run(context.Background(), Config{BaseURL: srv.URL, Concurrency: 2, Calls: 300, KeepBodies: true},
		func(int) Call { return Call{Method: "POST", Path: "/", Body: []byte(`{}`)} }, nil)
	s := Summarize(answers, time.Second)
	if s.ByResult["GRANTED"] != 100 || s.ByResult["SOLD_OUT"] != 100 || s.ByResult["RATE_LIMITED"] != 100 {
		t.Fatalf("answers by result %v, want 100 of each", s.ByResult)
	}
	for _, a := range answers {
		if a.Result == "GRANTED" && (a.Status != 200 || string(a.Body) != `{"items":[{"result":"X"}],"result":"GRANTED"}`) {
			t.Fatalf("chunked answer %d %q", a.Status, a.Body)
		}
		if a.Result == "SOLD_OUT" && a.Status != 409 {
			t.Fatalf("status %d", a.Status)
		}
	}
	if dropped := Run(context.Background(), Config{BaseURL: srv.URL, Concurrency: 1, Calls: 3},
		func(int) Call { return Call{Method: "GET", Path: "/"} }, nil); dropped[0].Body != nil {
		t.Errorf("a body kept without KeepBodies")
	}
}

// TestRunSendsAgainWhenAnIdleConnectionWasClosed: a kept-alive connection the
// server closed between two calls is not an answer; the call goes out on a new one.
func TestRunSendsAgainWhenAnIdleConnectionWasClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // one answer per connection, then close without saying so
				defer c.Close()
				r := bufio.NewReader(c)
				req, err := http.ReadRequest(r)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n{\"result\":\"GRANTED\"}")
			}()
		}
	}()
	answers := Run(context.Background(), Config{BaseURL: "http://" + ln.Addr().String(), Concurrency: 1, Calls: 20},
		func(int) Call { return Call{Method: "POST", Path: "/", Body: []byte(`{}`)} },
		func(Answer) { time.Sleep(5 * time.Millisecond) }) // the close reaches the client first
	if s := Summarize(answers, time.Second); s.ByResult["GRANTED"] != 20 {
		t.Errorf("answers by result %v, want 20 GRANTED", s.ByResult)
	}
}

func TestRunStopsWhenTheContextEnds(t *testing.T) {
	// The run's context ends as the server takes its fifth request, not after a
	// time: on a slow machine a timer could end it before any call was sent. The
	// thousand calls take 25 s; a run that stops takes a few more at most.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var requests atomic.Int64
	var cancelled atomic.Int64 // when the context ended, in Unix nanoseconds
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 5 {
			cancelled.Store(time.Now().UnixNano())
			cancel()
		}
		time.Sleep(50 * time.Millisecond)
		_, _ = w.Write([]byte(`{"result":"GRANTED"}`))
	}))
	defer srv.Close()
	answers := Run(ctx, Config{BaseURL: srv.URL, Concurrency: 2, Calls: 1000}, func(int) Call { return Call{Method: "GET", Path: "/"} }, nil)
	if ctx.Err() == nil {
		t.Fatalf("the run ended before its context, after %d requests", requests.Load())
	}
	// A bound on a hang (the rest of the run would take 25 s), not a speed.
	if past := time.Since(time.Unix(0, cancelled.Load())); past > 10*time.Second {
		t.Fatalf("ran %s past its context", past)
	}
	sent := 0
	for _, a := range answers {
		if a.Result != "" || a.Status != 0 {
			sent++
		}
	}
	// Five calls were made by the fifth request; after it each of the two workers
	// ends the call it is in, the other perhaps a sixth it began just before, and
	// makes no more.
	if sent < 5 || sent > 6 || requests.Load() > 6 {
		t.Errorf("%d answers and %d requests of a run whose context ended at the fifth request; want 5 or 6 of each", sent, requests.Load())
	}
}

// TestRunGivesUpOnASilentServer: a server that reads the request and never answers
// costs a call its Timeout, no more, and the call is not sent again.
func TestRunGivesUpOnASilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var requests atomic.Int64
	silent := make(chan struct{})
	defer close(silent)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					requests.Add(1)
				}
				select { // silent for 30 s, or until the test ends
				case <-silent:
				case <-time.After(30 * time.Second):
				}
			}()
		}
	}()
	start := time.Now()
	answers := Run(context.Background(), Config{BaseURL: "http://" + ln.Addr().String(), Concurrency: 1, Calls: 1, Timeout: 100 * time.Millisecond},
		func(int) Call { return Call{Method: "POST", Path: "/", Body: []byte(`{}`)} }, nil)
	// A bound far from both the timeout and the server's silence: the room between
	// is a loaded machine's, not the code's.
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a call with a 100 ms timeout took %s", took)
	}
	if a := answers[0]; a.Result != "TRANSPORT_ERROR" || a.Status != 0 {
		t.Errorf("answer %+v, want a TRANSPORT_ERROR", a)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests sent, want 1", n)
	}
}

// RunTasks runs every task once, concurrency at a time, and keeps each answer at
// its task's index.
func TestRunTasksRunsEachTaskOnce(t *testing.T) {
	t.Parallel()
	var running, most atomic.Int64
	answers := RunTasks(context.Background(), Config{Concurrency: 4, Calls: 100}, func(_ context.Context, i int) Answer {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		return Answer{Status: 200, Result: strconv.Itoa(i)}
	}, nil)
	for i, a := range answers {
		if a.Index != i || a.Result != strconv.Itoa(i) {
			t.Fatalf("answer %d: %+v", i, a)
		}
	}
	if m := most.Load(); m > 4 {
		t.Fatalf("%d tasks ran at once, concurrency 4", m)
	}
}
