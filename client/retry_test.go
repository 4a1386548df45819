package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// These tests hold the client's own retry rules against an httptest server that
// answers as api/openapi.yaml says grab-service and promo-admin may: the rules
// are the client's, so a scripted server is the thing to test them with. The
// component test (stack_test.go) drives the real services.

// scripted answers each request with the next of its replies and keeps what it got.
type scripted struct {
	t       *testing.T
	mu      sync.Mutex
	replies []reply
	got     []sent
}

// reply is one scripted answer; lose drops the connection after reading the
// request (the service may have served it; its answer is lost).
type reply struct {
	status     int
	body       string
	retryAfter string
	delay      time.Duration
	lose       bool
}

type sent struct {
	method, path, body string
	header             http.Header
}

func serve(t *testing.T, replies ...reply) (*scripted, *httptest.Server) {
	s := &scripted{t: t, replies: replies}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.got = append(s.got, sent{r.Method, r.URL.RequestURI(), string(b), r.Header.Clone()})
	if len(s.replies) == 0 {
		s.mu.Unlock()
		s.t.Errorf("unscripted request %s %s", r.Method, r.URL)
		w.WriteHeader(http.StatusTeapot)
		return
	}
	rep, n := s.replies[0], len(s.got)
	if len(s.replies) > 1 {
		s.replies = s.replies[1:]
	}
	s.mu.Unlock()
	time.Sleep(rep.delay)
	if rep.lose {
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = c.Close()
		}
		return
	}
	if rep.retryAfter != "" {
		w.Header().Set("Retry-After", rep.retryAfter)
	}
	w.Header().Set("X-Request-Id", "xr-"+strconv.Itoa(n))
	w.WriteHeader(rep.status)
	_, _ = io.WriteString(w, rep.body)
}

func (s *scripted) requests() []sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sent(nil), s.got...)
}

// fast retries quickly, so that the tests do not wait on backoff.
var fast = RetryPolicy{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}

func newClient(t *testing.T, srv *httptest.Server, p RetryPolicy, obs Observer) *Client {
	c, err := New(Config{BaseURL: srv.URL, Token: "tok", Retry: p, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var buyer = GrabRequest{RequestID: "order-1", Pin: "pin-1", IP: "10.0.0.1", Items: []Item{{PromoID: "sale", Type: 1, Num: 1}}}

const granted = `{"requestId":"order-1","result":"GRANTED","items":[{"promoId":"sale","type":1,"num":1,"remaining":9}]}`

// A grab answered 503, then 500, then GRANTED is sent three times, the same body
// under the same requestId, numbered 1, 2, 3, with the token; the observer sees
// every send and the call.
func TestGrabRetriesTheSameBodyNumberingItsAttempts(t *testing.T) {
	t.Parallel()
	s, srv := serve(t,
		reply{status: 503, body: `{"requestId":"order-1","result":"UNAVAILABLE","message":"shard 3 is unavailable; nothing was taken"}`},
		reply{status: 500, body: `{"code":"INTERNAL","message":"unexpected"}`},
		reply{status: 200, body: granted})
	var mu sync.Mutex
	var attempts []AttemptInfo
	var results []CallInfo
	obs := ObserverFuncs{
		Attempt: func(a AttemptInfo) { mu.Lock(); attempts = append(attempts, a); mu.Unlock() },
		Result:  func(c CallInfo) { mu.Lock(); results = append(results, c); mu.Unlock() },
	}
	ans, err := newClient(t, srv, fast, obs).Grab(context.Background(), buyer)
	if err != nil {
		t.Fatalf("Grab: %v", err)
	}
	if ans.Result != ResultGranted || ans.Attempts != 3 || len(ans.Items) != 1 || *ans.Items[0].Remaining != 9 {
		t.Fatalf("answer %+v", ans)
	}
	got := s.requests()
	for i, r := range got {
		if r.body != got[0].body || r.method != "POST" || r.path != "/v1/grab" {
			t.Errorf("send %d: %s %s %s, want the first's body %s", i+1, r.method, r.path, r.body, got[0].body)
		}
		if a := r.header.Get("X-Grab-Attempt"); a != strconv.Itoa(i+1) {
			t.Errorf("send %d: X-Grab-Attempt %q", i+1, a)
		}
		if r.header.Get("Authorization") != "Bearer tok" || r.header.Get("X-Request-Id") != "order-1" || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("send %d: headers %v", i+1, r.header)
		}
	}
	if got[0].body != `{"requestId":"order-1","pin":"pin-1","ip":"10.0.0.1","items":[{"promoId":"sale","type":1,"num":1}]}` {
		t.Errorf("body %s", got[0].body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 3 || attempts[0].Outcome != "UNAVAILABLE" || attempts[1].Outcome != "INTERNAL" || attempts[2].Outcome != "GRANTED" ||
		!attempts[0].Retry || attempts[2].Retry || attempts[1].StatusCode != 500 || attempts[0].Op != OpGrab {
		t.Errorf("attempts seen %+v", attempts)
	}
	if len(results) != 1 || results[0].Attempts != 3 || results[0].Outcome != "GRANTED" || results[0].Err != nil || results[0].RequestID != "order-1" {
		t.Errorf("results seen %+v", results)
	}
}

// A definite refusal is sent once and returned as an *Error with its result.
func TestGrabRefusalsAreFinal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status  int
		body    string
		result  Result
		code    Code
		refused bool
		failed  int
	}{
		{409, `{"requestId":"order-1","result":"SOLD_OUT","failedItem":0}`, ResultSoldOut, "", true, 0},
		{409, `{"requestId":"order-1","result":"REQUEST_ID_REUSED","message":"another body"}`, ResultRequestIDReused, "", true, -1},
		{409, `{"requestId":"order-1","result":"CHANNEL_NOT_ALLOWED","failedItem":1}`, ResultChannelNotAllowed, "", true, 1},
		{403, `{"requestId":"order-1","result":"BLOCKED"}`, ResultBlocked, "", true, -1},
		{503, `{"requestId":"order-1","result":"DEGRADED","message":"grabs are switched off by on-call; retry later"}`, ResultDegraded, "", true, -1},
		{400, `{"code":"INVALID_REQUEST","message":"too many","field":"items[0].num"}`, "", CodeInvalidRequest, false, -1},
		{401, `{"code":"UNAUTHORIZED","message":"no token"}`, "", CodeUnauthorized, false, -1},
	} {
		s, srv := serve(t, reply{status: tc.status, body: tc.body})
		_, err := newClient(t, srv, fast, nil).Grab(context.Background(), buyer)
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%d %s: err %v, want an *Error", tc.status, tc.body, err)
		}
		if e.Result != tc.result || e.Code != tc.code || e.Refused() != tc.refused || e.FailedItem != tc.failed ||
			e.Attempts != 1 || e.Unknown || e.StatusCode != tc.status || ResultOf(err) != tc.result || CodeOf(err) != tc.code {
			t.Errorf("%d %s: error %+v (refused %v)", tc.status, tc.body, e, e.Refused())
		}
		if n := len(s.requests()); n != 1 {
			t.Errorf("%d %s: sent %d times", tc.status, tc.body, n)
		}
	}
}

// 429 is retried after its Retry-After, not sooner.
func TestGrabWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	s, srv := serve(t, reply{status: 429, retryAfter: "1", body: `{"requestId":"order-1","result":"RATE_LIMITED"}`}, reply{status: 200, body: granted})
	start := time.Now()
	if _, err := newClient(t, srv, fast, nil).Grab(context.Background(), buyer); err != nil {
		t.Fatalf("Grab: %v", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("retried after %s, before the Retry-After of 1 s", took)
	}
	if n := len(s.requests()); n != 2 {
		t.Fatalf("sent %d times", n)
	}
}

// NoRateLimitRetry returns a 429 at once.
func TestNoRateLimitRetry(t *testing.T) {
	t.Parallel()
	s, srv := serve(t, reply{status: 429, retryAfter: "1", body: `{"requestId":"order-1","result":"RATE_LIMITED","failedItem":0}`})
	_, err := newClient(t, srv, RetryPolicy{NoRateLimitRetry: true}, nil).Grab(context.Background(), buyer)
	var e *Error
	if !errors.As(err, &e) || e.Result != ResultRateLimited || e.FailedItem != 0 || e.RetryAfter != time.Second || e.Unknown || len(s.requests()) != 1 {
		t.Fatalf("err %+v", err)
	}
}

// A 429 after a lost answer settles it: the limits refuse only sends that hold no
// claim, so nothing is held under the requestId (the crash drill found a grab
// counted unknown on this).
func TestRateLimitedAfterALostAnswerIsKnown(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, reply{lose: true}, reply{status: 429, retryAfter: "1", body: `{"requestId":"order-1","result":"RATE_LIMITED","failedItem":0}`})
	_, err := newClient(t, srv, RetryPolicy{NoRateLimitRetry: true, MinBackoff: time.Millisecond}, nil).Grab(context.Background(), buyer)
	var e *Error
	if !errors.As(err, &e) || e.Result != ResultRateLimited || e.Unknown || e.Attempts != 2 {
		t.Fatalf("err %+v, want RATE_LIMITED known after two sends", err)
	}
}

// A Retry-After that ends after the caller's deadline is not waited: the call
// returns the 429 at once, with it, outcome known (nothing taken).
func TestGrabDoesNotWaitPastTheDeadline(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, reply{status: 429, retryAfter: "30", body: `{"requestId":"order-1","result":"RATE_LIMITED"}`})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := newClient(t, srv, fast, nil).Grab(ctx, buyer)
	var e *Error
	if !errors.As(err, &e) || e.Result != ResultRateLimited || e.RetryAfter != 30*time.Second || e.Attempts != 1 || e.Unknown || e.Refused() {
		t.Fatalf("err %+v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("returned after %s", took)
	}
}

// A send the caller's deadline cuts short leaves the call described by the last
// answer that came, with the context's error.
func TestDeadlineCuttingASendKeepsTheLastAnswer(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, reply{status: 503, body: `{"requestId":"order-1","result":"UNAVAILABLE","message":"shard 3 is being rebuilt"}`},
		reply{delay: time.Second, status: 200, body: granted})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := newClient(t, srv, fast, nil).Grab(ctx, buyer)
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != 503 || e.Result != ResultUnavailable || e.Attempts != 2 || !errors.Is(err, context.DeadlineExceeded) || !e.Unknown {
		t.Fatalf("err %+v", err)
	}
}

// The caller's deadline bounds the whole call, retries included.
func TestGrabStopsAtTheDeadline(t *testing.T) {
	t.Parallel()
	s, srv := serve(t, reply{status: 503, body: `{"requestId":"order-1","result":"UNAVAILABLE","message":"shard 3 is being rebuilt"}`})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := newClient(t, srv, RetryPolicy{MaxAttempts: 1000, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}, nil).Grab(ctx, buyer)
	took := time.Since(start)
	var e *Error
	// The deadline may cut the last send before the server reads it: the server
	// saw every attempt, or every attempt but that last one.
	if seen := len(s.requests()); !errors.As(err, &e) || e.Result != ResultUnavailable || e.Attempts < 3 || e.Attempts < seen || e.Attempts > seen+1 {
		t.Fatalf("err %+v, server saw %d", err, seen)
	}
	if took > 2*time.Second {
		t.Fatalf("returned after %s, deadline 300 ms", took)
	}
}

// A send whose answer is lost may have been granted: retried, it is answered
// GRANTED (a replay); never answered, the error says the outcome is unknown.
func TestGrabLostAnswers(t *testing.T) {
	t.Parallel()
	s, srv := serve(t, reply{lose: true}, reply{status: 200, body: `{"requestId":"order-1","result":"GRANTED","items":[{"promoId":"sale","type":1,"num":1}]}`})
	ans, err := newClient(t, srv, fast, nil).Grab(context.Background(), buyer)
	if err != nil || ans.Attempts != 2 {
		t.Fatalf("after a lost answer: %+v, %v", ans, err)
	}
	if got := s.requests(); got[1].header.Get("X-Grab-Attempt") != "2" || got[1].body != got[0].body {
		t.Fatalf("the retry: %+v", got[1])
	}

	_, srv = serve(t, reply{lose: true})
	_, err = newClient(t, srv, RetryPolicy{MaxAttempts: 3, MinBackoff: time.Millisecond}, nil).Grab(context.Background(), buyer)
	var e *Error
	if !errors.As(err, &e) || !e.Unknown || e.StatusCode != 0 || e.Attempts != 3 || e.Err == nil || !OutcomeUnknown(err) || e.Refused() {
		t.Fatalf("never answered: %+v", err)
	}
}

// Nothing listens: nothing was sent, so nothing is unknown.
func TestGrabToNoServiceIsKnownToHaveTakenNothing(t *testing.T) {
	t.Parallel()
	_, srv := serve(t)
	srv.Close()
	_, err := newClient(t, srv, RetryPolicy{MaxAttempts: 2, MinBackoff: time.Millisecond}, nil).Grab(context.Background(), buyer)
	var e *Error
	if !errors.As(err, &e) || e.Unknown || e.Attempts != 2 || e.Err == nil {
		t.Fatalf("err %+v", err)
	}
}

// A 503 UNDECIDED leaves the outcome open until the end; ROLLED_BACK is final at
// once (every replay would answer it); NOTHING_TAKEN to a first send says nothing
// stands; a 503 without a decision is read as UNDECIDED.
func TestGrabUnavailableKinds(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"requestId":"order-1","result":"UNAVAILABLE","message":"another send of this requestId is in flight","decision":"UNDECIDED"}`,
		`{"requestId":"order-1","result":"UNAVAILABLE","message":"shard 3 is being rebuilt; nothing was taken"}`,
	} {
		_, srv := serve(t, reply{status: 503, body: body})
		_, err := newClient(t, srv, RetryPolicy{MaxAttempts: 3, MinBackoff: time.Millisecond}, nil).Grab(context.Background(), buyer)
		if !OutcomeUnknown(err) {
			t.Fatalf("%s until the end: %+v, want the outcome unknown", body, err)
		}
	}

	s, srv := serve(t,
		reply{status: 503, body: `{"requestId":"order-1","result":"UNAVAILABLE","message":"the grab could not be committed","decision":"ROLLED_BACK"}`},
		reply{status: 200, body: granted})
	_, err := newClient(t, srv, RetryPolicy{MaxAttempts: 10, MinBackoff: time.Millisecond}, nil).Grab(context.Background(), buyer)
	var e *Error
	if !errors.As(err, &e) || e.Unknown || e.Result != ResultUnavailable || e.Decision != DecisionRolledBack || e.Attempts != 1 || len(s.requests()) != 1 {
		t.Fatalf("rolled back: %+v", err)
	}

	// A first send's NOTHING_TAKEN: spent on it, the call knows nothing stands;
	// after a send that may have taken, it does not.
	_, srv = serve(t, reply{status: 503, body: `{"requestId":"order-1","result":"UNAVAILABLE","message":"shard 3 is being rebuilt","decision":"NOTHING_TAKEN"}`})
	_, err = newClient(t, srv, RetryPolicy{MaxAttempts: 1}, nil).Grab(context.Background(), buyer)
	if !errors.As(err, &e) || e.Unknown {
		t.Fatalf("a first send's 503: %+v", err)
	}
	_, srv = serve(t, reply{lose: true}, reply{status: 503, body: `{"requestId":"order-1","result":"UNAVAILABLE","decision":"NOTHING_TAKEN"}`})
	_, err = newClient(t, srv, RetryPolicy{MaxAttempts: 2, MinBackoff: time.Millisecond}, nil).Grab(context.Background(), buyer)
	if !OutcomeUnknown(err) {
		t.Fatalf("NOTHING_TAKEN after a lost answer: %+v, want the outcome unknown", err)
	}
}

// A grab sent before (Resend) is numbered as a retry from its first send.
func TestGrabResendIsNumberedAsARetry(t *testing.T) {
	t.Parallel()
	s, srv := serve(t, reply{status: 503, body: `{"requestId":"order-1","result":"UNAVAILABLE"}`}, reply{status: 200, body: granted})
	req := buyer
	req.Resend = true
	if _, err := newClient(t, srv, fast, nil).Grab(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := s.requests()
	if got[0].header.Get("X-Grab-Attempt") != "2" || got[1].header.Get("X-Grab-Attempt") != "3" {
		t.Fatalf("X-Grab-Attempt %q, %q, want 2, 3", got[0].header.Get("X-Grab-Attempt"), got[1].header.Get("X-Grab-Attempt"))
	}
}

// A send that hangs is cut at AttemptTimeout and the call retries.
func TestAttemptTimeoutLeavesTimeToRetry(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, reply{delay: 2 * time.Second, status: 200, body: granted}, reply{status: 200, body: granted})
	c, err := New(Config{BaseURL: srv.URL, AttemptTimeout: 100 * time.Millisecond, Retry: fast})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ans, err := c.Grab(context.Background(), buyer)
	if err != nil || ans.Attempts != 2 || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("%+v %v after %s", ans, err, time.Since(start))
	}
}

// A cancel is retried through 503 and 429 to its answer; NOT_FOUND is final.
func TestCancelRetriesToItsAnswer(t *testing.T) {
	t.Parallel()
	s, srv := serve(t,
		reply{status: 503, body: `{"requestId":"order-1","result":"UNAVAILABLE","message":"part of this grab was still being committed; retry the cancel for the outcome"}`},
		reply{status: 429, retryAfter: "0", body: `{"requestId":"order-1","result":"RATE_LIMITED"}`},
		reply{status: 200, body: `{"requestId":"order-1","result":"RETURNED","items":[{"promoId":"sale","type":1,"num":1,"amount":120}]}`})
	c := newClient(t, srv, fast, nil)
	ans, err := c.Cancel(context.Background(), "order-1", "pin-1", ReasonPaymentExpired)
	if err != nil || ans.Result != ResultReturned || ans.Attempts != 3 || *ans.Items[0].Amount != 120 {
		t.Fatalf("cancel: %+v %v", ans, err)
	}
	for _, r := range s.requests() {
		if r.path != "/v1/grab/order-1/cancel" || r.body != `{"pin":"pin-1","reason":"PAYMENT_EXPIRED"}` || r.header.Get("X-Grab-Attempt") != "" {
			t.Fatalf("cancel sent %+v", r)
		}
	}

	_, srv = serve(t, reply{status: 404, body: `{"code":"NOT_FOUND","message":"no granted grab"}`})
	_, err = newClient(t, srv, fast, nil).Cancel(context.Background(), "order-1", "pin-1", "")
	if CodeOf(err) != CodeNotFound || OutcomeUnknown(err) {
		t.Fatalf("cancel of nothing: %v", err)
	}
}

// A confirm of a hold that ran out is refused ALREADY_RETURNED.
func TestConfirmOfAnExpiredHold(t *testing.T) {
	t.Parallel()
	s, srv := serve(t, reply{status: 409, body: `{"requestId":"order-1","result":"ALREADY_RETURNED"}`})
	_, err := newClient(t, srv, fast, nil).Confirm(context.Background(), "order-1", "pin-1")
	var e *Error
	if !errors.As(err, &e) || e.Result != ResultAlreadyReturned || !e.Refused() {
		t.Fatalf("confirm: %v", err)
	}
	if r := s.requests()[0]; r.path != "/v1/grab/order-1/confirm" || r.body != `{"pin":"pin-1"}` {
		t.Fatalf("confirm sent %+v", r)
	}
}

// The status is public: sent without the token, decoded to typed fields.
func TestStatusIsPublicAndTyped(t *testing.T) {
	t.Parallel()
	s, srv := serve(t, reply{status: 200, body: `{"promoId":"sale","type":1,"state":"ACTIVE","remaining":7,"startAt":"2026-01-01T00:00:00Z","endAt":"2026-01-02T00:00:00.5Z"}`})
	st, err := newClient(t, srv, fast, nil).Status(context.Background(), "sale", 1)
	if err != nil || st.State != StateActive || st.Remaining != 7 || st.EndAt.Nanosecond() != 5e8 || st.RemainingAmount != nil {
		t.Fatalf("status %+v %v", st, err)
	}
	if r := s.requests()[0]; r.path != "/v1/promotions/sale/1/status" || r.header.Get("Authorization") != "" {
		t.Fatalf("status sent %+v", r)
	}
}

func newAdmin(t *testing.T, srv *httptest.Server) *Admin {
	a, err := NewAdmin(Config{BaseURL: srv.URL, Token: "admin", Retry: fast})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A create whose answer was lost, retried into ALREADY_EXISTS, is the create that
// landed when the promotion is the one asked for.
func TestCreateLostAnswerIsFoundByItsSpec(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := PromotionSpec{PromoID: "sale", Type: 1, Total: 10, PerPinLimit: 1, StartAt: start, EndAt: start.Add(time.Hour)}
	stored := `{"promoId":"sale","type":1,"total":10,"perPinLimit":1,"perIpLimit":0,"maxPerGrab":1,"startAt":"2026-01-01T00:00:00Z","endAt":"2026-01-01T01:00:00Z",` +
		`"key":"C_sale_1","shard":3,"state":"ACTIVE","remaining":10,"granted":0,"createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"}`
	exists := reply{status: 409, body: `{"code":"ALREADY_EXISTS","message":"exists"}`}
	s, srv := serve(t, reply{lose: true}, exists, reply{status: 200, body: stored})
	p, err := newAdmin(t, srv).Create(context.Background(), spec)
	if err != nil || p.Key != "C_sale_1" || p.State != StateActive {
		t.Fatalf("create: %+v %v", p, err)
	}
	got := s.requests()
	if got[0].body != `{"promoId":"sale","type":1,"total":10,"perPinLimit":1,"startAt":"2026-01-01T00:00:00Z","endAt":"2026-01-01T01:00:00Z"}` ||
		got[0].header.Get("Authorization") != "Bearer admin" || got[2].method != "GET" || got[2].path != "/v1/promotions/sale/1" {
		t.Fatalf("sent %+v", got)
	}

	// Not lost: ALREADY_EXISTS is somebody else's promotion.
	_, srv = serve(t, exists)
	if _, err := newAdmin(t, srv).Create(context.Background(), spec); CodeOf(err) != CodeAlreadyExists {
		t.Fatalf("create of an existing promotion: %v", err)
	}
	// Lost, but the promotion found is another: ALREADY_EXISTS.
	spec.Total = 11
	_, srv = serve(t, reply{lose: true}, exists, reply{status: 200, body: stored})
	if _, err := newAdmin(t, srv).Create(context.Background(), spec); CodeOf(err) != CodeAlreadyExists {
		t.Fatalf("create found another promotion: %v", err)
	}
}

// BUSY is retried; a delete whose answer was lost, retried into NOT_FOUND, is done.
func TestAdminRetriesBusyAndLostDeletes(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, reply{status: 409, body: `{"code":"BUSY","message":"a change is pending"}`}, reply{lose: true}, reply{status: 404, body: `{"code":"NOT_FOUND","message":"no such promotion"}`})
	if err := newAdmin(t, srv).Delete(context.Background(), "sale", 1); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, srv = serve(t, reply{status: 404, body: `{"code":"NOT_FOUND","message":"no such promotion"}`})
	if err := newAdmin(t, srv).Delete(context.Background(), "sale", 1); CodeOf(err) != CodeNotFound {
		t.Fatalf("delete of nothing: %v", err)
	}
	s, srv := serve(t, reply{status: 409, body: `{"code":"BELOW_GRANTED","message":"granted 5"}`})
	total := int64(1)
	if _, err := newAdmin(t, srv).Patch(context.Background(), "sale", 1, PromotionPatch{Total: &total}); CodeOf(err) != CodeBelowGranted {
		t.Fatalf("patch below granted: %v", err)
	}
	if r := s.requests()[0]; r.method != "PATCH" || r.body != `{"total":1}` {
		t.Fatalf("patch sent %+v", r)
	}
}

// List sends its options as the query.
func TestListSendsItsOptions(t *testing.T) {
	t.Parallel()
	s, srv := serve(t, reply{status: 200, body: `{"items":[],"nextCursor":"abc"}`})
	page, err := newAdmin(t, srv).List(context.Background(), ListOptions{State: StateDeleted, Limit: 5, Cursor: "x y"})
	if err != nil || page.NextCursor != "abc" {
		t.Fatalf("list: %+v %v", page, err)
	}
	if p := s.requests()[0].path; p != "/v1/promotions?cursor=x+y&limit=5&state=DELETED" {
		t.Fatalf("list sent %s", p)
	}
}

func TestBadConfigAndRequests(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{BaseURL: "127.0.0.1:8080"}); err == nil {
		t.Fatal("a BaseURL without a scheme was taken")
	}
	_, srv := serve(t)
	if _, err := newClient(t, srv, fast, nil).Grab(context.Background(), GrabRequest{}); err == nil {
		t.Fatal("a grab without a requestId was sent")
	}
}
