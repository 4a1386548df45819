package grabtransport_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/grab-service/internal/grabtransport"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/lua"
)

// 2,000 pins × 3 attempts at concurrency 200 for 500 units, 2 per pin: exactly 500
// granted, no pin above its limit, and Redis and the acknowledged events agree.
func TestSaleGrantsExactlyTotal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.promotion("sale", spec{total: 500, perPin: 2, maxPerGrab: 1})
	const pins, attempts, workers = 2000, 3, 200
	var granted, other atomic.Int64
	perPin := make([]atomic.Int64, pins)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				pin := n % pins
				a := e.grab(grabBody(fmt.Sprintf("r-%d", n), fmt.Sprintf("pin-%d", pin), fmt.Sprintf("10.0.%d.%d", pin/250, pin%250), id, 1))
				switch {
				case a.status == http.StatusOK && a.res.Result == grab.Granted:
					granted.Add(1)
					perPin[pin].Add(1)
				case a.status == http.StatusConflict && (a.res.Result == grab.SoldOut || a.res.Result == grab.PinLimit):
					other.Add(1)
				case a.status == http.StatusServiceUnavailable && a.res.Result == grab.Unavailable:
					// A Kafka acknowledgement slower than the publisher's bound on a
					// busy machine: rolled back, so the unit goes to another attempt.
					other.Add(1)
				default:
					t.Errorf("unexpected answer %d %s", a.status, a.raw)
				}
			}
		}()
	}
	for n := 0; n < pins*attempts; n++ {
		jobs <- n
	}
	close(jobs)
	wg.Wait()

	if granted.Load() != 500 {
		t.Fatalf("granted %d, want exactly 500 (refused %d)", granted.Load(), other.Load())
	}
	h := e.hash(id)
	if h.Remaining != 0 {
		t.Errorf("remaining %d after selling out, want 0", h.Remaining)
	}
	var held int64
	for p := range perPin {
		n := e.held(id, "pin", fmt.Sprintf("pin-%d", p))
		if n > 2 {
			t.Errorf("pin-%d holds %d, limit 2", p, n)
		}
		if n != perPin[p].Load() {
			t.Errorf("pin-%d: Redis holds %d, answers granted %d", p, n, perPin[p].Load())
		}
		held += n
	}
	if held != 500 {
		t.Errorf("pins hold %d in Redis, want 500", held)
	}
	if grabs := countEvents(e.pub.Events(), flow.Grab); grabs != 500 {
		t.Errorf("%d GRAB events acknowledged, want 500", grabs)
	}
}

func countEvents(events []flow.Event, kind flow.Kind) int {
	n := 0
	for _, ev := range events {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// twoShards returns two promotion ids of this env that live on different shards.
func (e *env) twoShards(a, b string, sa, sb spec) (string, string) {
	ida := e.promotion(a, sa)
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s%d", b, i)
		if ring.Default.Shard(promo.Key(name+"-"+e.suffix, 1)) != ring.Default.Shard(promo.Key(ida, 1)) {
			return ida, e.promotion(name, sb)
		}
	}
}

func TestMultiShardGrabIsAllOrNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.twoShards("multi-a", "multi-b", spec{total: 10}, spec{total: 1})
	if r := e.grab(grabBody("first", "someone", "10.1.1.1", b, 1)); r.res.Result != grab.Granted {
		t.Fatalf("selling b out: %d %s", r.status, r.raw)
	}
	r := e.grab(grabBody("both", "buyer", "10.1.1.2", a, 2, b, 1))
	if r.status != http.StatusConflict || r.res.Result != grab.SoldOut || r.res.FailedItem == nil || *r.res.FailedItem != 1 {
		t.Fatalf("want 409 SOLD_OUT failedItem 1, have %d %s", r.status, r.raw)
	}
	if h := e.hash(a); h.Remaining != 10 {
		t.Errorf("a remaining %d after the failed grab, want 10", h.Remaining)
	}
	if n := e.held(a, "pin", "buyer"); n != 0 {
		t.Errorf("buyer holds %d of a, want 0", n)
	}
	// The ledger forgot the undone take, so the same request can run again later.
	if _, found, _ := lua.ReadLedger(context.Background(), e.shard(promo.Key(a, 1)), promo.Key(a, 1), e.rid("both")); found {
		t.Errorf("ledger still holds the undone take")
	}
	// And both shards take together when both can.
	a2, b2 := e.twoShards("multi-c", "multi-d", spec{total: 5}, spec{total: 5})
	r = e.grab(grabBody("pair", "buyer", "10.1.1.2", a2, 2, b2, 3))
	if r.status != http.StatusOK || len(r.res.Items) != 2 || *r.res.Items[0].Remaining != 3 || *r.res.Items[1].Remaining != 2 {
		t.Fatalf("want GRANTED with remaining 3 and 2, have %d %s", r.status, r.raw)
	}
}

// With the broker stopped mid-sale every answer is GRANTED or 503, and once
// settled remaining + GRANTED answers == total.
func TestBrokerStoppedMidSale(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *grab.Config, _ *grab.Deps) { c.AnswerTimeout = 1500 * time.Millisecond })
	const total = 400
	id := e.promotion("kafka-down", spec{total: total, maxPerGrab: 1})
	var granted, unavailable, answered atomic.Int64
	var stop sync.Once
	var wg sync.WaitGroup
	jobs := make(chan int)
	for w := 0; w < 40; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				a := e.grab(grabBody(fmt.Sprintf("k-%d", n), fmt.Sprintf("p-%d", n), "10.2.0.1", id, 1))
				switch {
				case a.status == http.StatusOK && a.res.Result == grab.Granted:
					granted.Add(1)
				case a.status == http.StatusServiceUnavailable && a.res.Result == grab.Unavailable:
					unavailable.Add(1)
				default:
					t.Errorf("answer %d %s: want GRANTED or 503", a.status, a.raw)
				}
				// Stop the broker once grants are flowing, not after a count of
				// answers: on a slow machine the first hundred may all time out.
				if answered.Add(1) >= 100 && granted.Load() >= 20 {
					stop.Do(e.kafka.Close)
				}
			}
		}()
	}
	for n := 0; n < 300; n++ {
		jobs <- n
	}
	close(jobs)
	wg.Wait()
	if unavailable.Load() == 0 || granted.Load() == 0 {
		t.Fatalf("granted %d, unavailable %d: the broker stop did not land mid-sale", granted.Load(), unavailable.Load())
	}
	if h := e.hash(id); h.Remaining+granted.Load() != total {
		t.Fatalf("remaining %d + granted answers %d != total %d", h.Remaining, granted.Load(), total)
	}
	if acked := countEvents(e.pub.Events(), flow.Grab); int64(acked) < granted.Load() {
		t.Errorf("%d GRAB events acknowledged for %d GRANTED answers", acked, granted.Load())
	}
}

func TestReplayCancelAndConflicts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.promotion("replay", spec{total: 10, perPin: 5})
	body := grabBody("rq-1", "alice", "10.3.0.1", id, 2)
	if r := e.grab(body); r.status != http.StatusOK || r.res.Result != grab.Granted {
		t.Fatalf("grab: %d %s", r.status, r.raw)
	}
	if r := e.grab(body); r.status != http.StatusOK || r.res.Result != grab.Granted {
		t.Fatalf("replay: want the first answer, have %d %s", r.status, r.raw)
	}
	if h := e.hash(id); h.Remaining != 8 {
		t.Fatalf("remaining %d after a grab and its replay, want 8", h.Remaining)
	}
	if r := e.grab(grabBody("rq-1", "alice", "10.3.0.1", id, 3)); r.status != http.StatusConflict || r.res.Result != grab.RequestIDReused {
		t.Fatalf("reuse with another body: want 409 REQUEST_ID_REUSED, have %d %s", r.status, r.raw)
	}
	if r := e.cancel("rq-1", "mallory"); r.status != http.StatusNotFound {
		t.Fatalf("cancel by another pin: want 404, have %d %s", r.status, r.raw)
	}
	if r := e.cancel("rq-1", "alice"); r.status != http.StatusOK || r.res.Result != grab.Returned {
		t.Fatalf("cancel: %d %s", r.status, r.raw)
	}
	if h := e.hash(id); h.Remaining != 10 {
		t.Fatalf("remaining %d after the cancel, want 10", h.Remaining)
	}
	if n := e.held(id, "pin", "alice"); n != 0 {
		t.Fatalf("alice still holds %d after the cancel", n)
	}
	if r := e.cancel("rq-1", "alice"); r.status != http.StatusOK || r.res.Result != grab.AlreadyReturned {
		t.Fatalf("second cancel: want ALREADY_RETURNED, have %d %s", r.status, r.raw)
	}
	if r := e.grab(body); r.status != http.StatusConflict || r.res.Result != grab.AlreadyReturned {
		t.Fatalf("replay after cancel: want 409 ALREADY_RETURNED, have %d %s", r.status, r.raw)
	}
	if h := e.hash(id); h.Remaining != 10 {
		t.Fatalf("remaining %d after replays, want 10", h.Remaining)
	}
	if r := e.cancel("never-granted", "alice"); r.status != http.StatusNotFound || r.err.Code != "NOT_FOUND" {
		t.Fatalf("cancel of an unknown grab: want 404 NOT_FOUND, have %d %s", r.status, r.raw)
	}
	evs := e.pub.Events()
	if countEvents(evs, flow.Grab) != 1 || countEvents(evs, flow.Cancel) != 1 {
		t.Fatalf("events: want one GRAB and one CANCEL, have %+v", evs)
	}
	// Idempotency holds across instances: a second service on the same shards.
	other := newEnv(t)
	if r := other.do("POST", "/v1/grab", checkoutToken, grabBody(e.rid("rq-1"), "alice", "10.3.0.1", id, 3)); r.res.Result != grab.RequestIDReused {
		t.Fatalf("other instance: want REQUEST_ID_REUSED, have %d %s", r.status, r.raw)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.clock.Now()
	ids := map[string]string{
		"scheduled": e.promotion("sched", spec{total: 5, start: now.Add(time.Hour), end: now.Add(2 * time.Hour)}),
		"ended":     e.promotion("ended", spec{total: 5, start: now.Add(-2 * time.Hour), end: now.Add(-time.Hour)}),
		"stopped":   e.promotion("stopped", spec{total: 5}),
		"limited":   e.promotion("limited", spec{total: 50, rateLimit: 2}),
		"pin":       e.promotion("pinlimit", spec{total: 50, perPin: 1}),
		"ip":        e.promotion("iplimit", spec{total: 50, perIP: 1}),
		"soldout":   e.promotion("soldout", spec{total: 1}),
		"max":       e.promotion("maxgrab", spec{total: 50, maxPerGrab: 2}),
	}
	key := promo.Key(ids["stopped"], 1)
	if _, err := lua.Stop(context.Background(), e.shard(key), ring.Default.Shard(key), key, 2, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	e.grab(grabBody("pin-1", "p", "10.4.0.1", ids["pin"], 1))
	e.grab(grabBody("ip-1", "p1", "10.4.0.2", ids["ip"], 1))
	e.grab(grabBody("so-1", "p1", "10.4.0.3", ids["soldout"], 1))
	e.grab(grabBody("rl-1", "a", "10.4.0.4", ids["limited"], 1))
	e.grab(grabBody("rl-2", "b", "10.4.0.5", ids["limited"], 1))
	cases := []struct {
		name   string
		body   map[string]any
		status int
		result grab.Outcome
	}{
		{"not started", grabBody("x1", "p", "10.4.1.1", ids["scheduled"], 1), 409, grab.NotStarted},
		{"ended", grabBody("x2", "p", "10.4.1.1", ids["ended"], 1), 409, grab.Ended},
		{"stopped", grabBody("x3", "p", "10.4.1.1", ids["stopped"], 1), 409, grab.Stopped},
		{"not found", grabBody("x4", "p", "10.4.1.1", "nothing-"+e.suffix, 1), 409, grab.NotFound},
		{"rate limited", grabBody("x5", "c", "10.4.1.1", ids["limited"], 1), 429, grab.RateLimited},
		{"pin limit", grabBody("x6", "p", "10.4.1.9", ids["pin"], 1), 409, grab.PinLimit},
		{"ip limit", grabBody("x7", "other", "10.4.0.2", ids["ip"], 1), 409, grab.IPLimit},
		{"sold out", grabBody("x8", "p2", "10.4.1.1", ids["soldout"], 1), 409, grab.SoldOut},
		{"sold out, last unit and one more", grabBody("x9", "p3", "10.4.1.1", ids["soldout"], 1), 409, grab.SoldOut},
	}
	for _, c := range cases {
		r := e.grab(c.body)
		if r.status != c.status || r.res.Result != c.result || r.res.FailedItem == nil || *r.res.FailedItem != 0 {
			t.Errorf("%s: want %d %s failedItem 0, have %d %s", c.name, c.status, c.result, r.status, r.raw)
		}
		if c.result == grab.RateLimited && r.header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After header", c.name)
		}
	}
	r := e.grab(grabBody("x10", "p", "10.4.1.1", ids["max"], 3))
	if r.status != 400 || r.err.Field != "items[0].num" {
		t.Errorf("above maxPerGrab: want 400 on items[0].num, have %d %s", r.status, r.raw)
	}
	if h := e.hash(ids["max"]); h.Remaining != 50 {
		t.Errorf("above maxPerGrab changed remaining to %d", h.Remaining)
	}
}

// A cached SOLD_OUT is stale for at most RefusalTTL after another instance returns stock.
func TestSoldOutShortCircuitIsBounded(t *testing.T) {
	t.Parallel()
	// Long cache lives, so only the test clock (never a slow run) expires them.
	e := newEnv(t, longCaches)
	id := e.promotion("short", spec{total: 1})
	key := promo.Key(id, 1)
	if r := e.grab(grabBody("s-1", "a", "10.5.0.1", id, 1)); r.res.Result != grab.Granted {
		t.Fatalf("first grab: %s", r.raw)
	}
	if r := e.grab(grabBody("s-2", "b", "10.5.0.2", id, 1)); r.res.Result != grab.SoldOut {
		t.Fatalf("second grab: want SOLD_OUT, have %s", r.raw)
	}
	// Another instance cancels: stock returns behind this instance's back.
	if rr, err := lua.Return(context.Background(), e.shard(key), lua.ReturnCall{RequestID: e.rid("s-1"), Pin: "a", Mode: lua.ReturnCancel, NowMs: e.clock.Now().UnixMilli(), Keys: []string{key}}); err != nil || rr.Code != lua.ReturnReturned {
		t.Fatalf("return behind the cache: %v %v", rr, err)
	}
	if r := e.grab(grabBody("s-3", "c", "10.5.0.3", id, 1)); r.res.Result != grab.SoldOut || !strings.Contains(r.res.Message, "cache") {
		t.Fatalf("within the bound: want the cached SOLD_OUT, have %s", r.raw)
	}
	if h := e.hash(id); h.Remaining != 1 {
		t.Fatalf("the cached answer touched Redis: remaining %d", h.Remaining)
	}
	e.clock.Advance(time.Hour)
	if r := e.grab(grabBody("s-4", "c", "10.5.0.3", id, 1)); r.res.Result != grab.Granted {
		t.Fatalf("after the bound: want GRANTED, have %s", r.raw)
	}
	// A cancel through this instance clears its own cache at once.
	if r := e.grab(grabBody("s-5", "d", "10.5.0.4", id, 1)); r.res.Result != grab.SoldOut {
		t.Fatalf("want SOLD_OUT again, have %s", r.raw)
	}
	if r := e.cancel("s-4", "c"); r.res.Result != grab.Returned {
		t.Fatalf("cancel: %s", r.raw)
	}
	if r := e.grab(grabBody("s-6", "d", "10.5.0.4", id, 1)); r.res.Result != grab.Granted {
		t.Fatalf("after a local cancel: want GRANTED at once, have %s", r.raw)
	}
}

func TestStatusIsCachedAndCacheable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, longCaches)
	id := e.promotion("status", spec{total: 7})
	path := "/v1/promotions/" + id + "/1/status"
	r := e.do("GET", path, "", nil)
	if r.status != 200 || r.header.Get("Cache-Control") != "public, max-age=1" || !strings.Contains(r.raw, `"remaining":7`) || !strings.Contains(r.raw, `"state":"ACTIVE"`) {
		t.Fatalf("status: %d %v %s", r.status, r.header, r.raw)
	}
	e.grab(grabBody("st-1", "a", "10.6.0.1", id, 1))
	if r := e.do("GET", path, "", nil); !strings.Contains(r.raw, `"remaining":7`) {
		t.Fatalf("within the cache life: want the cached 7, have %s", r.raw)
	}
	e.clock.Advance(time.Hour)
	if r := e.do("GET", path, "", nil); !strings.Contains(r.raw, `"remaining":6`) {
		t.Fatalf("after the cache life: want 6, have %s", r.raw)
	}
	if r := e.do("GET", "/v1/promotions/none-"+e.suffix+"/1/status", "", nil); r.status != 404 || r.err.Code != "NOT_FOUND" {
		t.Fatalf("unknown promotion: %d %s", r.status, r.raw)
	}
	if r := e.do("GET", "/v1/promotions/"+id+"/100/status", "", nil); r.status != 400 || r.err.Field != "type" {
		t.Fatalf("bad type: %d %s", r.status, r.raw)
	}
}

func TestSwitchesDriveTheGrabPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.promotion("switch", spec{total: 10})
	set := func(doc string) {
		snap, err := configcenter.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		e.switches.Store(snap)
	}
	set(`{"grabEnabled": false}`)
	if r := e.grab(grabBody("sw-1", "a", "10.7.0.1", id, 1)); r.status != 503 || r.res.Result != grab.Degraded {
		t.Fatalf("grabs off: want 503 DEGRADED, have %d %s", r.status, r.raw)
	}
	set(`{"grabEnabled": true, "blockedPromotions": ["` + id + `_1"]}`)
	if r := e.grab(grabBody("sw-2", "a", "10.7.0.1", id, 1)); r.status != 409 || r.res.Result != grab.Stopped {
		t.Fatalf("blocked: want 409 STOPPED, have %d %s", r.status, r.raw)
	}
	// One grab per 100 s, burst 1: the first grab passes and the rest are refused
	// however slowly they are sent (a limit of 1/s refilled between slow grabs).
	set(`{"grabEnabled": true, "methodLimits": {"grab": 0.01, "cancel": 0}}`)
	statuses := map[int]int{}
	for i := 0; i < 5; i++ {
		r := e.grab(grabBody(fmt.Sprintf("sw-3-%d", i), "a", "10.7.0.1", id, 1))
		statuses[r.status]++
		if r.status == 429 && (r.res.Result != grab.RateLimited || r.header.Get("Retry-After") == "") {
			t.Fatalf("method limit: want RATE_LIMITED with Retry-After, have %v %s", r.header, r.raw)
		}
	}
	if statuses[429] != 4 || statuses[200] != 1 {
		t.Fatalf("method limit of 0.01/s over 5 grabs: statuses %v, want one 200 and four 429", statuses)
	}
	if h := e.hash(id); h.Remaining != int64(10-statuses[200]) {
		t.Fatalf("remaining %d, want %d: refused grabs took stock", h.Remaining, 10-statuses[200])
	}
}

func longCaches(c *grab.Config, _ *grab.Deps) {
	c.RefusalTTL, c.StatusTTL = time.Hour, time.Hour
}

// The bounds themselves are the defaults, well inside the contract's 1 s.
func TestCacheBoundsAreShort(t *testing.T) {
	c := grab.Defaults()
	if c.RefusalTTL > time.Second || c.StatusTTL > time.Second {
		t.Fatalf("refusal cache %v, status cache %v: both must stay within 1 s", c.RefusalTTL, c.StatusTTL)
	}
}

// A requestId is unique across the platform: reusing it for another promotion, on
// another shard, is refused even though that promotion's ledger never saw it.
func TestRequestIDReusedForAnotherPromotion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.twoShards("reuse-a", "reuse-b", spec{total: 5}, spec{total: 5})
	if r := e.grab(grabBody("same-id", "alice", "10.10.0.1", a, 1)); r.res.Result != grab.Granted {
		t.Fatalf("first grab: %s", r.raw)
	}
	if r := e.grab(grabBody("same-id", "alice", "10.10.0.1", b, 1)); r.status != http.StatusConflict || r.res.Result != grab.RequestIDReused {
		t.Fatalf("reuse for another promotion: want 409 REQUEST_ID_REUSED, have %d %s", r.status, r.raw)
	}
	if h := e.hash(b); h.Remaining != 5 {
		t.Fatalf("the refused reuse took stock of b: remaining %d", h.Remaining)
	}
	// A refused grab does not hold its requestId: the same id may then be used anew.
	if r := e.grab(grabBody("refused-id", "bob", "10.10.0.2", "missing-"+e.suffix, 1)); r.res.Result != grab.NotFound {
		t.Fatalf("grab of a missing promotion: %s", r.raw)
	}
	if r := e.grab(grabBody("refused-id", "bob", "10.10.0.2", b, 1)); r.res.Result != grab.Granted {
		t.Fatalf("a refused requestId used again: want GRANTED, have %s", r.raw)
	}
}

// A retry of a granted grab (its answer lost to a crash, say) gets its first answer
// even while the promotion is known sold out: the short-circuit answers only request
// ids that hold nothing. Found by the crash drill: the retry got SOLD_OUT from the
// cache while Redis held its unit.
func TestReplayOfAGrantIsNotAnsweredFromTheSoldOutCache(t *testing.T) {
	t.Parallel()
	e := newEnv(t, longCaches)
	id := e.promotion("replay-cache", spec{total: 1})
	first := grabBody("rc-1", "alice", "10.11.0.1", id, 1)
	if r := e.grab(first); r.res.Result != grab.Granted {
		t.Fatalf("first grab: %s", r.raw)
	}
	if r := e.grab(grabBody("rc-2", "bob", "10.11.0.2", id, 1)); r.res.Result != grab.SoldOut {
		t.Fatalf("second grab: want SOLD_OUT, have %s", r.raw)
	}
	if r := e.grab(first); r.status != http.StatusOK || r.res.Result != grab.Granted {
		t.Fatalf("replay while sold out: want the first answer GRANTED, have %d %s", r.status, r.raw)
	}
	if r := e.grab(grabBody("rc-3", "carol", "10.11.0.3", id, 1)); r.res.Result != grab.SoldOut || !strings.Contains(r.res.Message, "cache") {
		t.Fatalf("a new request: want SOLD_OUT from the cache, have %s", r.raw)
	}
}

// A first attempt (X-Grab-Attempt: 1) is answered from the local SOLD_OUT cache
// with no Redis call at all; without the header, or on a retry (2 and up), the
// requestId is looked up first, so a retry of a grant still gets its first answer.
// A caller that marks a retry of its grant as a first attempt is refused, and the
// refusal changes nothing: the grant stands and a true retry gets it.
func TestFirstAttemptIsAnsweredWithoutTheIndex(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, longCaches, func(_ *grab.Config, d *grab.Deps) { d.Metrics = grab.NewMetrics(reg) })
	id := e.promotion("first-attempt", spec{total: 1})
	first := grabBody("fa-1", "alice", "10.13.0.1", id, 1)
	if r := e.grabAttempt(first, "1"); r.status != http.StatusOK || r.res.Result != grab.Granted {
		t.Fatalf("first grab: %d %s", r.status, r.raw)
	}
	if r := e.grabAttempt(grabBody("fa-2", "bob", "10.13.0.2", id, 1), "1"); r.res.Result != grab.SoldOut {
		t.Fatalf("second grab: want SOLD_OUT from Redis, have %s", r.raw)
	}

	before := redisCalls(t, reg)
	if r := e.grabAttempt(grabBody("fa-3", "carol", "10.13.0.3", id, 1), "1"); r.status != http.StatusConflict ||
		r.res.Result != grab.SoldOut || !strings.Contains(r.res.Message, "cache") {
		t.Fatalf("a first attempt: want 409 SOLD_OUT from the cache, have %d %s", r.status, r.raw)
	}
	if have := redisCalls(t, reg); have != before {
		t.Fatalf("a first attempt answered from the cache made %v Redis calls, want none", have-before)
	}
	for _, attempt := range []string{"", "2"} {
		if r := e.grabAttempt(grabBody("fa-4"+attempt, "dave", "10.13.0.4", id, 1), attempt); r.res.Result != grab.SoldOut {
			t.Fatalf("attempt %q: want SOLD_OUT, have %s", attempt, r.raw)
		}
	}
	if have := redisCalls(t, reg); have != before+2 {
		t.Fatalf("two grabs not known to be first made %v Redis calls, want 2 (the index lookups)", have-before)
	}

	if r := e.grabAttempt(first, "2"); r.status != http.StatusOK || r.res.Result != grab.Granted {
		t.Fatalf("a retry of the grant while sold out: want its first answer GRANTED, have %d %s", r.status, r.raw)
	}
	if r := e.grabAttempt(first, "1"); r.res.Result != grab.SoldOut {
		t.Fatalf("a retry marked first: want the cached SOLD_OUT, have %s", r.raw)
	}
	if h := e.hash(id); h.Remaining != 0 || e.held(id, "pin", "alice") != 1 {
		t.Fatalf("the refused retry changed the grant: remaining %d, alice holds %d", h.Remaining, e.held(id, "pin", "alice"))
	}
	if r := e.grab(first); r.res.Result != grab.Granted {
		t.Fatalf("the grant after a retry marked first: want GRANTED, have %s", r.raw)
	}
}

// The attempt header, when sent, is a positive integer; anything else is a 400 that
// names it and takes nothing.
func TestAttemptHeaderIsValidated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.promotion("attempt-header", spec{total: 5})
	for i, v := range []string{"0", "-1", "one", "1.0", "1000001", "99999999999999999999"} {
		r := e.grabAttempt(grabBody(fmt.Sprintf("ah-%d", i), "a", "10.14.0.1", id, 1), v)
		if r.status != http.StatusBadRequest || r.err.Code != "INVALID_REQUEST" || r.err.Field != grabtransport.AttemptHeader {
			t.Errorf("attempt %q: want 400 INVALID_REQUEST on %s, have %d %s", v, grabtransport.AttemptHeader, r.status, r.raw)
		}
	}
	if h := e.hash(id); h.Remaining != 5 {
		t.Fatalf("refused headers took stock: remaining %d", h.Remaining)
	}
	if r := e.grabAttempt(grabBody("ah-ok", "a", "10.14.0.1", id, 1), "3"); r.res.Result != grab.Granted {
		t.Fatalf("attempt 3: want GRANTED, have %d %s", r.status, r.raw)
	}
}

// redisCalls is how many script and index calls the service has sent to Redis.
func redisCalls(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "flashsale_grab_redis_pipeline_calls" {
			return mf.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	t.Fatal("no flashsale_grab_redis_pipeline_calls metric")
	return 0
}

// A shard that fails rather than refuses (its server does not answer) during a
// multi-shard grab: the answer is 503 UNAVAILABLE naming that item, and the take on
// the shard that answered is undone at once (stock back, its ledger forgets it), so
// a later grab of the same request runs afresh.
func TestMultiShardGrabWithAFailingShardTakesNothing(t *testing.T) {
	t.Parallel()
	const down = 9
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	e := newEnv(t, func(_ *grab.Config, d *grab.Deps) {
		d.Shards = append([]redis.UniversalClient(nil), d.Shards...)
		d.Shards[down] = dead
	})
	onShard := func(prefix string, want func(int) bool) string {
		for i := 0; ; i++ {
			name := fmt.Sprintf("%s%d", prefix, i)
			if want(ring.Default.Shard(promo.Key(name+"-"+e.suffix, 1))) {
				return name
			}
		}
	}
	up := e.promotion(onShard("up", func(s int) bool { return s != down }), spec{total: 10})
	gone := e.promotion(onShard("gone", func(s int) bool { return s == down }), spec{total: 10})
	rid := "fail-0"
	for i := 1; ring.Default.Shard(promo.RequestIndexKey(e.rid(rid))) == down; i++ { // its claim must land
		rid = fmt.Sprintf("fail-%d", i)
	}

	r := e.grab(grabBody(rid, "dana", "10.16.0.1", up, 2, gone, 1))
	if r.status != http.StatusServiceUnavailable || r.res.Result != grab.Unavailable || r.res.FailedItem == nil || *r.res.FailedItem != 1 {
		t.Fatalf("want 503 UNAVAILABLE failedItem 1, have %d %s", r.status, r.raw)
	}
	if h := e.hash(up); h.Remaining != 10 || e.held(up, "pin", "dana") != 0 {
		t.Fatalf("the answering shard kept the take: remaining %d, dana holds %d", h.Remaining, e.held(up, "pin", "dana"))
	}
	if _, found, _ := lua.ReadLedger(context.Background(), e.shard(promo.Key(up, 1)), promo.Key(up, 1), e.rid(rid)); found {
		t.Fatal("the ledger still holds the undone take")
	}
	if r := e.grab(grabBody(rid, "dana", "10.16.0.1", up, 2)); r.res.Result != grab.Granted {
		t.Fatalf("the same requestId alone on the answering shard afterwards: want GRANTED, have %s", r.raw)
	}
}

// A cancel or confirm whose request index shard does not answer, of a grab the
// record does not hold (yet: the sink lags Kafka), cannot tell whether the grab
// exists: 503 UNAVAILABLE, retry, never a definite 404 NOT_FOUND.
func TestCancelWithItsIndexShardDownIsUnavailable(t *testing.T) {
	t.Parallel()
	const down = 11
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	e := newEnv(t, func(_ *grab.Config, d *grab.Deps) {
		d.Shards = append([]redis.UniversalClient(nil), d.Shards...)
		d.Shards[down] = dead
	})
	rid := "idx-0"
	for i := 1; ring.Default.Shard(promo.RequestIndexKey(e.rid(rid))) != down; i++ {
		rid = fmt.Sprintf("idx-%d", i)
	}
	for _, path := range []string{"/cancel", "/confirm"} {
		a := e.do("POST", "/v1/grab/"+e.rid(rid)+path, checkoutToken, map[string]any{"pin": "erin"})
		if a.status != http.StatusServiceUnavailable || a.res.Result != grab.Unavailable {
			t.Fatalf("%s with the index shard down: %d %s, want 503 UNAVAILABLE", path, a.status, a.raw)
		}
	}
	// With the shard up, the same request is a definite 404.
	other := "idx-up-0"
	for i := 1; ring.Default.Shard(promo.RequestIndexKey(e.rid(other))) == down; i++ {
		other = fmt.Sprintf("idx-up-%d", i)
	}
	if a := e.cancel(other, "erin"); a.status != http.StatusNotFound {
		t.Fatalf("cancel of an unknown grab, index shard up: %d %s, want 404", a.status, a.raw)
	}
}
