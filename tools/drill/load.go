package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/flashsale/platform/client"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/tools/checker"
	"github.com/flashsale/platform/tools/loadgen"
)

// load is the steady grab load of the drills: many buyers, many promotions over all
// 16 shards, multi-shard grabs, cancels mixed in. It sends them through the
// checkout client (client/), which retries a transport error or a 5xx with the
// same requestId and the same body until a definite answer arrives, so the final
// answer of every request is known (or the request is counted unresolved), and it
// keeps every final answer for the checker.
type load struct {
	grabs       *client.Client // retries to a definite answer within budget
	once        *client.Client // sends once: a probe's first send
	budget      time.Duration  // retry budget of one request
	cancelShare float64        // share of grants cancelled afterwards
	run         string

	seq  atomic.Int64
	mu   sync.Mutex
	reqs []*checker.Request
}

// stats counts one drill's traffic.
type stats struct {
	mu       sync.Mutex
	attempts int64            // HTTP requests sent, retries included
	requests int64            // distinct requestIds
	grabs    map[string]int64 // final grab answers by result
	cancels  map[string]int64 // final cancel answers by result
	retried  int64            // requests that needed more than one attempt
}

func newStats() *stats { return &stats{grabs: map[string]int64{}, cancels: map[string]int64{}} }

func (s *stats) add(o *stats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts += o.attempts
	s.requests += o.requests
	s.retried += o.retried
	for k, v := range o.grabs {
		s.grabs[k] += v
	}
	for k, v := range o.cancels {
		s.cancels[k] += v
	}
}

// newLoad is the load of the drills, with connections for up to workers buyers. A
// rate-limited answer is final, as the rated promotions' limits must show; other
// retries back off from 25 ms to 1 s with jitter, as long as the budget allows.
func newLoad(base, token, run string, workers int) (*load, error) {
	hc := loadgen.Client(workers, 10*time.Second)
	policy := client.RetryPolicy{MaxAttempts: 1_000_000, MinBackoff: 25 * time.Millisecond, MaxBackoff: time.Second, NoRateLimitRetry: true}
	grabs, err := client.New(client.Config{BaseURL: base, Token: token, HTTPClient: hc, AttemptTimeout: 10 * time.Second, Retry: policy, UserAgent: "flashsale-drill"})
	if err != nil {
		return nil, err
	}
	policy.MaxAttempts = 1
	once, err := client.New(client.Config{BaseURL: base, Token: token, HTTPClient: hc, AttemptTimeout: 10 * time.Second, Retry: policy, UserAgent: "flashsale-drill"})
	if err != nil {
		return nil, err
	}
	return &load{grabs: grabs, once: once, budget: 60 * time.Second, cancelShare: 0.2, run: run}, nil
}

// requests returns every request sent so far.
func (l *load) requests() []checker.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]checker.Request, len(l.reqs))
	for i, r := range l.reqs {
		out[i] = *r
	}
	return out
}

// running is one load run; stop ends it and waits for every request in flight to
// reach its final answer.
type running struct {
	stop func() *stats
}

// shape is how hard a run sells: perSecond grabs by workers buyers at once, over
// pins buyers from ips addresses. perSecond 0 is no pace at all: each worker grabs
// again as soon as it has its answer, so the stack runs at its peak (saturation),
// as the bench's hot phase drives it.
type shape struct {
	perSecond float64
	workers   int
	pins, ips int
}

// start sells round r until stop is called.
func (l *load) start(r *round, sh shape) running {
	st := newStats()
	ctx, cancel := context.WithCancel(context.Background())
	lim := rate.NewLimiter(rate.Inf, 1)
	if sh.perSecond > 0 {
		lim = rate.NewLimiter(rate.Limit(sh.perSecond), max(1, int(sh.perSecond/20)))
	}
	var wg sync.WaitGroup
	for w := 0; w < sh.workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
			for lim.Wait(ctx) == nil {
				l.one(r, rnd, st, sh)
			}
		}(uint64(w))
	}
	return running{stop: func() *stats {
		cancel()
		wg.Wait()
		return st
	}}
}

// one buyer: a grab, and sometimes its cancel.
func (l *load) one(r *round, rnd *rand.Rand, st *stats, sh shape) {
	req := l.buyer(r, rnd, sh)
	l.track(req)
	answer, attempts := l.grab(req, false)
	final := answer.result
	l.mu.Lock()
	req.Grab = final
	keepAmounts(req, answer)
	req.Done = time.Now()
	l.mu.Unlock()
	st.mu.Lock()
	st.requests++
	st.attempts += int64(attempts)
	st.grabs[final]++
	if attempts > 1 {
		st.retried++
	}
	st.mu.Unlock()
	if final != "GRANTED" || rnd.Float64() >= l.cancelShare {
		return
	}
	l.cancel(req, rnd, st)
}

// buyer makes one buyer's grab of round r: its request, recorded Unknown until
// answered.
func (l *load) buyer(r *round, rnd *rand.Rand, sh shape) *checker.Request {
	u := rnd.IntN(sh.pins)
	req := &checker.Request{
		RequestID: fmt.Sprintf("%s-%d", l.run, l.seq.Add(1)),
		Pin:       fmt.Sprintf("%s-%s-u%d", l.run, r.name, u),
		IP:        fmt.Sprintf("10.%d.%d.%d", 1+rnd.IntN(2), (u%sh.ips)/250, (u%sh.ips)%250+1),
		Sent:      time.Now(),
	}
	for _, s := range r.pick(rnd) {
		n := int64(1)
		if rnd.IntN(5) == 0 {
			n = 2
		}
		req.Items = append(req.Items, checker.Item{PromoID: s.PromoID, Type: s.Type, Num: n})
	}
	if rnd.IntN(2) == 0 {
		// Half the buyers' checkouts derive their requestIds beside the first
		// promotion (docs/CONTRACT.md): single-shard grabs of them are claimed in
		// the take's own script call, the others on their own, both under the faults.
		req.RequestID = client.RequestIDBeside(req.RequestID, req.Items[0].PromoID, req.Items[0].Type)
	}
	req.Grab = checker.Unknown
	return req
}

// cancel cancels the granted req a moment later, for a reason picked at random.
func (l *load) cancel(req *checker.Request, rnd *rand.Rand, st *stats) {
	time.Sleep(time.Duration(rnd.IntN(30)) * time.Millisecond)
	reason := []client.CancelReason{client.ReasonUserCancelled, client.ReasonPaymentExpired, client.ReasonStockShort, client.ReasonOther}[rnd.IntN(4)]
	l.mu.Lock()
	req.Cancel = checker.Unknown
	l.mu.Unlock()
	canswer, cattempts := l.cancelGrab(req, reason)
	cfinal := canswer.result
	l.mu.Lock()
	req.Cancel = cfinal
	keepAmounts(req, canswer)
	req.Done = time.Now()
	l.mu.Unlock()
	st.mu.Lock()
	st.attempts += int64(cattempts)
	st.cancels[cfinal]++
	st.mu.Unlock()
}

// reply is one answer as the load sees it.
type reply struct {
	status  int
	result  string // the body's result, else its code, else HTTP_<status>; checker.Unknown for a final answer not known
	message string
	// amounts are the envelope pools' items' amounts the answer carried (GRANTED:
	// taken; RETURNED: given back), by promotion key.
	amounts map[string]int64
}

// keepAmounts keeps what a final GRANTED or RETURNED answer said of the request's
// envelope pool items, for the checker (invariant 7). Call it with l.mu held.
func keepAmounts(req *checker.Request, a reply) {
	for i, it := range req.Items {
		amount, ok := a.amounts[it.Key()]
		switch {
		case !ok:
		case a.result == "GRANTED":
			req.Items[i].Amount = amount
		case a.result == "RETURNED":
			req.Items[i].Returned = amount
		}
	}
}

// grab sends req through the checkout client until its answer is definite or the
// budget is spent: the client retries a transport error, a 5xx or a 503 with the
// same requestId and body, numbering its attempts (X-Grab-Attempt) as a careful
// checkout service does (from 2 when resend: it was sent before). It returns the
// final answer (checker.Unknown when the grab may stand) and the sends made.
func (l *load) grab(req *checker.Request, resend bool) (reply, int) {
	ctx, cancel := context.WithTimeout(context.Background(), l.budget)
	defer cancel()
	ans, err := l.grabs.Grab(ctx, grabRequest(req, resend))
	return final(ans, err)
}

// cancelGrab cancels req through the client, retried like a grab.
func (l *load) cancelGrab(req *checker.Request, reason client.CancelReason) (reply, int) {
	ctx, cancel := context.WithTimeout(context.Background(), l.budget)
	defer cancel()
	ans, err := l.grabs.Cancel(ctx, req.RequestID, req.Pin, reason)
	return final(ans, err)
}

// grabRequest is req's grab as the client sends it.
func grabRequest(req *checker.Request, resend bool) client.GrabRequest {
	g := client.GrabRequest{RequestID: req.RequestID, Pin: req.Pin, IP: req.IP, Resend: resend}
	for _, it := range req.Items {
		g.Items = append(g.Items, client.Item{PromoID: it.PromoID, Type: it.Type, Num: it.Num})
	}
	return g
}

// final is a call's final answer as the checker reads it: its result, or
// checker.Unknown when the client says the outcome is not known (or no answer
// ever came), and the sends it took.
func final(ans *client.Answer, err error) (reply, int) {
	r := replyOf(ans, err)
	var e *client.Error
	if errors.As(err, &e) && (e.Unknown || e.StatusCode == 0) {
		r.result = checker.Unknown
	}
	if ans != nil {
		return r, ans.Attempts
	}
	if e != nil {
		return r, max(e.Attempts, 1)
	}
	return r, 1
}

// replyOf reads a call's answer: its result (else its code, else the status), its
// message, and the envelope pools' amounts it carried; a call that got no answer
// is the zero reply.
func replyOf(ans *client.Answer, err error) reply {
	if err == nil {
		r := reply{status: http.StatusOK, result: string(ans.Result), message: ans.Message}
		for _, it := range ans.Items {
			if it.Amount != nil {
				if r.amounts == nil {
					r.amounts = map[string]int64{}
				}
				r.amounts[promo.Key(it.PromoID, it.Type)] = *it.Amount
			}
		}
		return r
	}
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode == 0 {
		return reply{}
	}
	r := reply{status: e.StatusCode, result: string(e.Result), message: e.Message}
	if r.result == "" {
		r.result = string(e.Code)
	}
	if r.result == "" {
		r.result = fmt.Sprintf("HTTP_%d", e.StatusCode)
	}
	return r
}
