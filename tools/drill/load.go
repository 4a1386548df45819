package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/tools/checker"
	"github.com/flashsale/platform/tools/loadgen"
)

// load is the steady grab load of the drills: many buyers, many promotions over all
// 16 shards, multi-shard grabs, cancels mixed in. Like a careful checkout service it
// retries a transport error or a 5xx with the same requestId and the same body until
// a definite answer arrives, so the final answer of every request is known (or the
// request is counted unresolved), and it keeps every final answer for the checker.
type load struct {
	base, token string
	client      *http.Client
	budget      time.Duration // retry budget of one request
	cancelShare float64       // share of grants cancelled afterwards
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

// newLoad is the load of the drills, with connections for up to workers buyers.
func newLoad(base, token, run string, workers int) *load {
	return &load{base: base, token: token, client: loadgen.Client(workers, 10*time.Second),
		budget: 60 * time.Second, cancelShare: 0.2, run: run}
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
	req, body := l.buyer(r, rnd, sh)
	l.track(req)
	answer, attempts := l.call("/v1/grab", body, grabDefinite)
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
// answered, and its body.
func (l *load) buyer(r *round, rnd *rand.Rand, sh shape) (*checker.Request, []byte) {
	u := rnd.IntN(sh.pins)
	req := &checker.Request{
		RequestID: fmt.Sprintf("%s-%d", l.run, l.seq.Add(1)),
		Pin:       fmt.Sprintf("%s-%s-u%d", l.run, r.name, u),
		IP:        fmt.Sprintf("10.%d.%d.%d", 1+rnd.IntN(2), (u%sh.ips)/250, (u%sh.ips)%250+1),
		Sent:      time.Now(),
	}
	var items []map[string]any
	for _, s := range r.pick(rnd) {
		n := int64(1)
		if rnd.IntN(5) == 0 {
			n = 2
		}
		req.Items = append(req.Items, checker.Item{PromoID: s.PromoID, Type: s.Type, Num: n})
		items = append(items, map[string]any{"promoId": s.PromoID, "type": s.Type, "num": n})
	}
	if rnd.IntN(2) == 0 {
		// Half the buyers' checkouts derive their requestIds beside the first
		// promotion (docs/CONTRACT.md): single-shard grabs of them are claimed in
		// the take's own script call, the others on their own, both under the faults.
		req.RequestID = promo.RequestIDBeside(req.RequestID, promo.Key(req.Items[0].PromoID, req.Items[0].Type))
	}
	req.Grab = checker.Unknown
	body, _ := json.Marshal(map[string]any{"requestId": req.RequestID, "pin": req.Pin, "ip": req.IP, "items": items})
	return req, body
}

// cancel cancels the granted req a moment later, for a reason picked at random.
func (l *load) cancel(req *checker.Request, rnd *rand.Rand, st *stats) {
	time.Sleep(time.Duration(rnd.IntN(30)) * time.Millisecond)
	reason := []string{"USER_CANCELLED", "PAYMENT_EXPIRED", "STOCK_SHORT", "OTHER"}[rnd.IntN(4)]
	cbody, _ := json.Marshal(map[string]any{"pin": req.Pin, "reason": reason})
	l.mu.Lock()
	req.Cancel = checker.Unknown
	l.mu.Unlock()
	canswer, cattempts := l.call("/v1/grab/"+req.RequestID+"/cancel", cbody, cancelDefinite)
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

// reply is one HTTP answer as the load sees it.
type reply struct {
	status  int
	result  string // the body's result, else its code
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

// grabDefinite tells a final grab answer from one to retry. A transport error or a
// 5xx is retried with the same requestId and body; but a 503 for a requestId that was
// rolled back is final, since every replay answers it the same way.
func grabDefinite(r reply) bool {
	switch {
	case r.status == 0, r.status >= 500 && r.status != http.StatusServiceUnavailable:
		return false
	case r.status == http.StatusServiceUnavailable:
		return r.result == "UNAVAILABLE" && strings.Contains(r.message, "rolled back")
	}
	return true
}

// nothingTaken: a 503 that states nothing was taken is a definite refusal even when
// the retry budget runs out on it; only a take still being committed, one whose
// rollback has not finished, or another send of the requestId in flight, is unknown.
func nothingTaken(r reply) bool {
	return r.status == http.StatusServiceUnavailable && (r.result == "DEGRADED" || r.result == "UNAVAILABLE") &&
		!strings.Contains(r.message, "still being committed") && !strings.Contains(r.message, "has not finished") &&
		!strings.Contains(r.message, "in flight")
}

func cancelDefinite(r reply) bool { return r.status != 0 && r.status < 500 }

// call sends body to path until definite(reply) or the budget is spent, backing
// off with jitter between attempts, and returns the final answer (its result
// checker.Unknown when none is definite) and the attempts made. A grab numbers its attempts
// (X-Grab-Attempt), as a careful checkout service does: the first may then be
// answered from grab-service's refusal cache, and every retry is looked up.
func (l *load) call(path string, body []byte, definite func(reply) bool) (reply, int) {
	return l.callFrom(path, body, definite, 1)
}

// callFrom is call whose first send is attempt number first (the requestId was
// sent first-1 times before).
func (l *load) callFrom(path string, body []byte, definite func(reply) bool, first int) (reply, int) {
	deadline := time.Now().Add(l.budget)
	var last reply
	for attempt := first; ; attempt++ {
		last = l.send(path, body, attempt)
		sent := attempt - first + 1
		if definite(last) {
			return last, sent
		}
		if time.Now().After(deadline) {
			if nothingTaken(last) && path == "/v1/grab" {
				return last, sent
			}
			return reply{status: last.status, result: checker.Unknown, message: last.message}, sent
		}
		time.Sleep(backoff(sent))
	}
}

// backoff is the wait before attempt n+1: doubling from 25 ms up to 1 s, with
// "equal jitter" so retries of many clients do not arrive in step.
func backoff(n int) time.Duration {
	d := 25 * time.Millisecond << min(n-1, 6)
	d = min(d, time.Second)
	return d/2 + rand.N(d/2+1)
}

// send makes one attempt of path through loadgen, as the bench sends its grabs; a
// transport error is the zero reply.
func (l *load) send(path string, body []byte, attempt int) reply {
	c := loadgen.Call{Method: http.MethodPost, Path: path, Body: body, Token: l.token}
	if path == "/v1/grab" {
		c.Attempt = attempt
	}
	a := loadgen.Do(context.Background(), l.client, l.base, c)
	if a.Status == 0 {
		return reply{}
	}
	return replyOf(a.Status, a.Body)
}

// replyOf reads an answer's body: its result (else its code, else the status), its
// message, and the envelope pools' amounts it carried.
func replyOf(status int, raw []byte) reply {
	var b struct {
		Result  string `json:"result"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Items   []struct {
			PromoID string `json:"promoId"`
			Type    int    `json:"type"`
			Amount  *int64 `json:"amount"`
		} `json:"items"`
	}
	_ = json.Unmarshal(raw, &b)
	r := reply{status: status, result: b.Result, message: b.Message}
	for _, it := range b.Items {
		if it.Amount != nil {
			if r.amounts == nil {
				r.amounts = map[string]int64{}
			}
			r.amounts[promo.Key(it.PromoID, it.Type)] = *it.Amount
		}
	}
	if r.result == "" {
		r.result = b.Code
	}
	if r.result == "" {
		r.result = fmt.Sprintf("HTTP_%d", status)
	}
	return r
}
