package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Config is what both clients are made of.
type Config struct {
	// BaseURL is the service's address: grab-service's for New, promo-admin's for
	// NewAdmin (the local stack: http://127.0.0.1:8080 and http://127.0.0.1:8081).
	BaseURL string
	// Token is sent as "Authorization: Bearer <Token>": the checkout service's
	// token for New, a merchandiser's (or a viewer's, to read) for NewAdmin. The
	// public status route is sent without it.
	Token string
	// HTTPClient sends the requests; nil means one with keep-alive connections
	// (64 idle per host). Its Timeout, if set, bounds every send.
	HTTPClient *http.Client
	// AttemptTimeout bounds one send, so that a hung connection leaves the call
	// time to retry; 0 means 5 s (grab-service answers within 3 s), below 0 none.
	AttemptTimeout time.Duration
	Retry          RetryPolicy
	Observer       Observer // nil: none
	UserAgent      string   // "" means flashsale-client/1
}

// maxAnswer bounds an answer's body read into memory (a list page of 500
// promotions is well under it).
const maxAnswer = 8 << 20

// endpoint sends the calls of one client to one service.
type endpoint struct {
	base, token, agent string
	http               *http.Client
	attemptTimeout     time.Duration
	policy             RetryPolicy
	obs                Observer
}

func newEndpoint(c Config) (*endpoint, error) {
	base := strings.TrimRight(c.BaseURL, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("flashsale client: BaseURL %q is not an http:// or https:// URL", c.BaseURL)
	}
	e := &endpoint{base: base, token: c.Token, agent: c.UserAgent, http: c.HTTPClient,
		attemptTimeout: c.AttemptTimeout, policy: c.Retry.withDefaults(), obs: c.Observer}
	if e.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		e.http = &http.Client{Transport: t}
	}
	if e.attemptTimeout == 0 {
		e.attemptTimeout = 5 * time.Second
	}
	if e.agent == "" {
		e.agent = "flashsale-client/1"
	}
	if e.obs == nil {
		e.obs = noObserver{}
	}
	return e, nil
}

// request is one call: what to send and how to judge each answer.
type request struct {
	op           Op
	method, path string
	body         []byte // sent as it is on every attempt; nil: no body
	public       bool   // sent without the token
	rid          string // the grab's requestId, for observers and X-Request-Id
	grabAttempt  int    // > 0: X-Grab-Attempt of the first send, counting up
	judge        judge
}

// answer is one send's outcome: an HTTP answer (status > 0) or err.
type answer struct {
	status   int
	header   http.Header
	body     wireBody
	raw      []byte
	err      error
	took     time.Duration
	decodeOK bool
}

// wireBody holds either body the services answer: a GrabResult or an Error.
type wireBody struct {
	RequestID  string       `json:"requestId"`
	Result     Result       `json:"result"`
	Items      []AnswerItem `json:"items"`
	FailedItem *int         `json:"failedItem"`
	Message    string       `json:"message"`
	Decision   Decision     `json:"decision"`
	Code       Code         `json:"code"`
	Field      string       `json:"field"`
}

func (a *answer) outcome() string {
	switch {
	case a.body.Result != "":
		return string(a.body.Result)
	case a.body.Code != "":
		return string(a.body.Code)
	case a.status != 0:
		return "HTTP_" + strconv.Itoa(a.status)
	case errors.Is(a.err, context.DeadlineExceeded):
		return "DEADLINE_EXCEEDED"
	case errors.Is(a.err, context.Canceled):
		return "CANCELED"
	}
	return "TRANSPORT_ERROR"
}

// do runs r to a final answer: the last answer, its send count, and nil, or the
// call's *Error.
func (e *endpoint) do(ctx context.Context, r request) (*answer, int, error) {
	start := time.Now()
	var unknown bool
	var answered *answer // the last send that got an HTTP answer
	for n := 1; ; n++ {
		a := e.send(ctx, r, n)
		if a.status != 0 {
			answered = a
		}
		v, k := r.judge(a, n, r.grabAttempt+n-1 > 1)
		if v == retry && a.status == http.StatusTooManyRequests && e.policy.NoRateLimitRetry {
			v = refuse
		}
		unknown = k.apply(unknown)
		var wait time.Duration
		again := v == retry
		if again {
			wait, again = e.policy.wait(ctx, n, retryAfter(a.header))
		}
		e.obs.OnAttempt(AttemptInfo{Op: r.op, RequestID: r.rid, Attempt: n, StatusCode: a.status, Outcome: a.outcome(),
			Duration: a.took, Err: a.err, Retry: again, Wait: wait})
		if again && sleep(ctx, wait) == nil {
			continue
		}
		var err error
		if v != success {
			err = e.errorOf(ctx, r, lastWord(ctx, a, answered), n, unknown)
		}
		e.obs.OnResult(CallInfo{Op: r.op, RequestID: r.rid, Attempts: n, StatusCode: a.status, Outcome: a.outcome(),
			Duration: time.Since(start), Err: err})
		return a, n, err
	}
}

// lastWord is the answer a call that ends on a describes: a, unless the caller's
// context cut a send short after an earlier one was answered; then that answer,
// with the context's error.
func lastWord(ctx context.Context, a, answered *answer) *answer {
	if a.status != 0 || answered == nil || ctx.Err() == nil {
		return a
	}
	w := *answered
	w.err = ctx.Err()
	return &w
}

func (e *endpoint) errorOf(ctx context.Context, r request, a *answer, n int, unknown bool) *Error {
	err := &Error{Op: r.op, StatusCode: a.status, Result: a.body.Result, Code: a.body.Code, Decision: a.body.Decision, Message: a.body.Message,
		Field: a.body.Field, FailedItem: -1, RetryAfter: retryAfter(a.header), Attempts: n, Unknown: unknown, Err: a.err}
	if a.body.FailedItem != nil {
		err.FailedItem = *a.body.FailedItem
	}
	if a.header != nil {
		err.XRequestID = a.header.Get("X-Request-Id")
	}
	if err.Err == nil && ctx.Err() != nil {
		err.Err = ctx.Err() // the wait for the next send was cut short
	}
	if err.Err == nil && a.status != 0 && !a.decodeOK && a.status != http.StatusNoContent {
		err.Err = fmt.Errorf("answer body is not the API's JSON: %.200q", a.raw)
	}
	return err
}

// send makes the n-th send of r.
func (e *endpoint) send(ctx context.Context, r request, n int) *answer {
	if e.attemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.attemptTimeout)
		defer cancel()
	}
	a := &answer{}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, e.base+r.path, body)
	if err != nil {
		a.err = err
		return a
	}
	e.headers(req, r, n)
	start := time.Now()
	resp, err := e.http.Do(req)
	if err != nil {
		a.err, a.took = err, time.Since(start)
		return a
	}
	defer resp.Body.Close()
	a.raw, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	a.took = time.Since(start)
	if err != nil { // the status came, the body did not: the answer is not known
		a.err = fmt.Errorf("read the answer (HTTP %d): %w", resp.StatusCode, err)
		return a
	}
	a.status, a.header = resp.StatusCode, resp.Header
	a.decodeOK = json.Unmarshal(a.raw, &a.body) == nil
	return a
}

func (e *endpoint) headers(req *http.Request, r request, n int) {
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", e.agent)
	if e.token != "" && !r.public {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	if r.rid != "" {
		// The services log under it: a grab's sends are found by its requestId.
		req.Header.Set("X-Request-Id", r.rid)
	}
	if r.grabAttempt > 0 {
		req.Header.Set("X-Grab-Attempt", strconv.Itoa(min(r.grabAttempt+n-1, maxGrabAttempt)))
	}
}

// decode reads a successful answer's raw body into v.
func decode(op Op, a *answer, n int, v any) error {
	if err := json.Unmarshal(a.raw, v); err != nil {
		return &Error{Op: op, StatusCode: a.status, FailedItem: -1, Attempts: n,
			Err: fmt.Errorf("decode the answer: %w", err)}
	}
	return nil
}

// dialFailed reports a send that never reached the service (nothing was sent),
// so its outcome is known: nothing happened.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
