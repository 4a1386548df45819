package grabtransport_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/lua"
)

// heldGrab grabs one unit of id with a hold of holdSeconds and requires GRANTED.
func (e *env) heldGrab(t *testing.T, rid, pin, id string, holdSeconds int) {
	t.Helper()
	body := grabBody(rid, pin, "10.9.0.1", id, 1)
	body["holdSeconds"] = holdSeconds
	if a := e.grab(body); a.status != http.StatusOK || a.res.Result != grab.Granted {
		t.Fatalf("held grab %s: %d %s", rid, a.status, a.raw)
	}
}

func (e *env) confirm(rid, pin string) answer {
	return e.do("POST", "/v1/grab/"+e.rid(rid)+"/confirm", checkoutToken, map[string]any{"pin": pin})
}

// expiredCancels counts the CANCEL events with reason PAYMENT_EXPIRED, by requestId.
func (e *env) expiredCancels() map[string]int {
	n := map[string]int{}
	for _, ev := range e.pub.Events() {
		if ev.Kind == flow.Cancel && ev.Reason == "PAYMENT_EXPIRED" {
			n[ev.RequestID]++
		}
	}
	return n
}

// past moves the service's clock past a hold of holdSeconds begun now.
func (e *env) past(holdSeconds int) {
	e.clock.Advance(e.cfg.AnswerTimeout + time.Duration(holdSeconds)*time.Second + time.Second)
}

// A held grant not confirmed in time is returned by the platform, once: stock
// back, a CANCEL with reason PAYMENT_EXPIRED, a late confirm told 409.
func TestHoldNotConfirmedIsReturnedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.promotion("hold", spec{total: 10, maxPerGrab: 1, perPin: 1})
	e.heldGrab(t, "h1", "pin-h1", id, 60)
	if n := e.reconcile().HoldsExpired; n != 0 {
		t.Fatalf("a pass within the hold returned %d", n)
	}
	if h := e.hash(id); h.Remaining != 9 {
		t.Fatalf("remaining %d within the hold", h.Remaining)
	}
	e.past(60)
	if n := e.reconcile().HoldsExpired; n != 1 {
		t.Fatalf("the pass past the hold returned %d, want 1", n)
	}
	if h := e.hash(id); h.Remaining != 10 {
		t.Fatalf("remaining %d after the hold ran out, want 10", h.Remaining)
	}
	if n := e.held(id, "pins", "pin-h1"); n > 0 {
		t.Fatalf("the pin still holds %d", n)
	}
	if n := e.reconcile().HoldsExpired; n != 0 {
		t.Fatalf("a second pass returned %d more", n)
	}
	if got := e.expiredCancels(); len(got) != 1 || got[e.rid("h1")] != 1 {
		t.Fatalf("PAYMENT_EXPIRED cancels %v, want one for %s", got, e.rid("h1"))
	}
	if a := e.confirm("h1", "pin-h1"); a.status != http.StatusConflict || a.res.Result != grab.AlreadyReturned {
		t.Fatalf("a confirm after the hold ran out: %d %s", a.status, a.raw)
	}
	// The pin may grab again: its limit of 1 was given back.
	e.heldGrab(t, "h2", "pin-h1", id, 60)
}

// A confirm within the hold keeps the grant for good; confirms repeat as CONFIRMED;
// a wrong pin or requestId is NOT_FOUND; a grant without a hold confirms too.
func TestHoldConfirmedStands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.promotion("keep", spec{total: 10, maxPerGrab: 1})
	e.heldGrab(t, "k1", "pin-k1", id, 30)
	for i := range 2 {
		if a := e.confirm("k1", "pin-k1"); a.status != http.StatusOK || a.res.Result != grab.Confirmed {
			t.Fatalf("confirm %d: %d %s", i, a.status, a.raw)
		}
	}
	for _, c := range []struct{ rid, pin string }{{"k1", "someone-else"}, {"nothing", "pin-k1"}} {
		if a := e.confirm(c.rid, c.pin); a.status != http.StatusNotFound {
			t.Fatalf("confirm of %s by %s: %d %s, want 404", c.rid, c.pin, a.status, a.raw)
		}
	}
	if a := e.grab(grabBody("k2", "pin-k2", "10.9.0.2", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("plain grab: %s", a.raw)
	}
	if a := e.confirm("k2", "pin-k2"); a.status != http.StatusOK || a.res.Result != grab.Confirmed {
		t.Fatalf("confirm of a grant without a hold: %d %s", a.status, a.raw)
	}
	e.past(30)
	if n := e.reconcile().HoldsExpired; n != 0 {
		t.Fatalf("a pass returned %d confirmed grants", n)
	}
	if h := e.hash(id); h.Remaining != 8 || len(e.expiredCancels()) != 0 {
		t.Fatalf("remaining %d and cancels %v after confirmed holds ran their time", h.Remaining, e.expiredCancels())
	}
}

// Many instances' passes at once return each expired hold once (each is leased
// to one pass); a return a crash left half done is taken up when its lease ends;
// a refused held grab leaves no hold behind; a bad holdSeconds is a 400.
func TestHoldsReturnedOnceAcrossPassesAndCrashes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 12
	id := e.promotion("many", spec{total: n + 1, maxPerGrab: 1})
	for i := range n {
		e.heldGrab(t, fmt.Sprintf("m%d", i), fmt.Sprintf("pin-m%d", i), id, 10)
	}
	e.past(10)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := e.rec.Reconcile(context.Background()); err != nil {
				t.Errorf("reconcile: %v", err)
			}
		})
	}
	wg.Wait()
	// Each grant is returned once: its stock once, and once in the record. The
	// CANCEL event itself is at least once, as every flow event: a pass that finds
	// the entry owing its CANCEL while another pass's return is publishing it
	// publishes it too, and the flow log takes one (inserts are idempotent).
	got := e.expiredCancels()
	for i := range n {
		if c := got[e.rid(fmt.Sprintf("m%d", i))]; c < 1 {
			t.Errorf("m%d: no PAYMENT_EXPIRED cancel", i)
		}
	}
	if h := e.hash(id); h.Remaining != n+1 {
		t.Fatalf("remaining %d after every hold ran out, want %d", h.Remaining, n+1)
	}
	if _, err := e.db.InsertFlows(ctx, e.pub.Events()); err != nil {
		t.Fatal(err)
	}
	if granted, err := e.db.GrantedByRecord(ctx, id, 1); err != nil || granted != 0 {
		t.Fatalf("the record holds %d grants (%v) after every hold was returned, want 0", granted, err)
	}

	// A crash between the lease and the return: the hold waits out its lease.
	e.heldGrab(t, "crash", "pin-crash", id, 10)
	e.past(10)
	idx := e.shard(promo.RequestIndexKey(e.rid("crash")))
	p := idx.Pipeline()
	leased := lua.QueueHoldsDue(ctx, p, e.cfg.HoldsKey, promo.ExpiringKey(e.cfg.HoldsKey), e.clock.Now().UnixMilli(), 30_000, 100)
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if rids, err := lua.ParseHoldsDue(leased); err != nil || len(rids) != 1 {
		t.Fatalf("the dying instance's lease: %v %v", rids, err)
	}
	if k := e.reconcile().HoldsExpired; k != 0 {
		t.Fatalf("a pass within another instance's lease returned %d", k)
	}
	e.clock.Advance(31 * time.Second)
	if k := e.reconcile().HoldsExpired; k != 1 || e.expiredCancels()[e.rid("crash")] != 1 {
		t.Fatalf("after the lease: returned %d, cancels %d; want 1 and 1", k, e.expiredCancels()[e.rid("crash")])
	}

	// A refused held grab (sold out) leaves no hold.
	one := e.promotion("one", spec{total: 1, maxPerGrab: 1})
	e.heldGrab(t, "last", "pin-last", one, 10)
	body := grabBody("refused", "pin-refused", "10.9.0.3", one, 1)
	body["holdSeconds"] = 10
	if a := e.grab(body); a.res.Result != grab.SoldOut {
		t.Fatalf("grab of a sold-out promotion: %s", a.raw)
	}
	if err := idx.ZScore(ctx, e.cfg.HoldsKey, e.rid("refused")).Err(); err != redis.Nil {
		t.Fatalf("a refused grab's hold: %v, want none", err)
	}
	for _, bad := range []any{0, 86401, "10", 1.5} {
		body := grabBody("bad", "pin-bad", "10.9.0.4", id, 1)
		body["holdSeconds"] = bad
		if a := e.grab(body); a.status != http.StatusBadRequest || a.err.Field != "holdSeconds" {
			t.Fatalf("holdSeconds %v: %d %s, want 400 naming holdSeconds", bad, a.status, a.raw)
		}
	}
}

// The record keeps what a rebuild needs of the holds: a held GRAB carries its hold's
// deadline (the one registered on the shard), a confirm is a CONFIRM event, and in
// MySQL exactly the holds neither confirmed nor returned are open, each at its
// deadline. A grant without a hold leaves no trace there.
func TestHoldsInTheRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.promotion("record", spec{total: 10, maxPerGrab: 1})
	for _, rid := range []string{"open", "paid", "gone"} {
		e.heldGrab(t, rid, "pin-"+rid, id, 120)
	}
	if a := e.grab(grabBody("plain", "pin-plain", "10.9.0.9", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("plain grab: %s", a.raw)
	}
	if a := e.confirm("paid", "pin-paid"); a.res.Result != grab.Confirmed {
		t.Fatalf("confirm: %s", a.raw)
	}
	if a := e.confirm("plain", "pin-plain"); a.res.Result != grab.Confirmed {
		t.Fatalf("confirm of a grant without a hold: %s", a.raw)
	}
	if a := e.cancel("gone", "pin-gone"); a.res.Result != grab.Returned {
		t.Fatalf("cancel: %s", a.raw)
	}
	deadline := func(rid string) int64 {
		ms, err := e.shard(promo.RequestIndexKey(e.rid(rid))).ZScore(ctx, e.cfg.HoldsKey, e.rid(rid)).Result()
		if err != nil {
			t.Fatalf("hold of %s: %v", rid, err)
		}
		return int64(ms)
	}
	openUntil := deadline("open")
	confirms := map[string]int{}
	for _, ev := range e.pub.Events() {
		switch {
		case ev.Kind == flow.Grab && ev.RequestID == e.rid("open") && ev.HoldUntil != openUntil:
			t.Errorf("the GRAB of open carries holdUntil %d; its hold's deadline is %d", ev.HoldUntil, openUntil)
		case ev.Kind == flow.Grab && ev.RequestID == e.rid("plain") && ev.HoldUntil != 0:
			t.Errorf("a GRAB without a hold carries holdUntil %d", ev.HoldUntil)
		case ev.Kind == flow.Confirm:
			confirms[ev.RequestID]++
		}
	}
	if len(confirms) != 1 || confirms[e.rid("paid")] == 0 {
		t.Fatalf("CONFIRM events %v, want paid's alone", confirms)
	}
	// Every event into the record, twice (a redelivery changes nothing).
	for range 2 {
		if _, err := e.db.InsertFlows(ctx, e.pub.Events()); err != nil {
			t.Fatal(err)
		}
	}
	open := map[string]int64{}
	for shard := range 16 {
		holds, err := e.db.Holds(ctx, shard, time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range holds {
			if h.Open && strings.HasSuffix(h.RequestID, "-"+e.suffix) {
				open[h.RequestID] = h.UntilMs
				if want := ring.Default.Shard(promo.RequestIndexKey(h.RequestID)); shard != want {
					t.Errorf("%s's hold is on index shard %d, its index entry on %d", h.RequestID, shard, want)
				}
			}
		}
	}
	if len(open) != 1 || open[e.rid("open")] != openUntil {
		t.Fatalf("open holds in the record %v, want %s until %d alone", open, e.rid("open"), openUntil)
	}
}

// A confirm the record did not take keeps nothing: the checkout is told to retry,
// the hold stays at its deadline, and unpaid it runs out as any other; a confirm
// that Kafka takes on the retry stands.
func TestConfirmNotAcknowledgedKeepsTheHold(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.promotion("unacked", spec{total: 10, maxPerGrab: 1})
	e.heldGrab(t, "late", "pin-late", id, 60)
	e.heldGrab(t, "retry", "pin-retry", id, 60)
	holds := func(rid string) (float64, error) {
		return e.shard(promo.RequestIndexKey(e.rid(rid))).ZScore(ctx, e.cfg.HoldsKey, e.rid(rid)).Result()
	}
	before, _ := holds("late")
	e.refuse(flow.Confirm)
	for _, rid := range []string{"late", "retry"} {
		if a := e.confirm(rid, "pin-"+rid); a.status != http.StatusServiceUnavailable || a.res.Result != grab.Unavailable {
			t.Fatalf("confirm of %s with its CONFIRM refused: %d %s, want 503 UNAVAILABLE", rid, a.status, a.raw)
		}
		if after, err := holds(rid); err != nil || rid == "late" && after != before {
			t.Fatalf("the hold of %s after a refused confirm: %v %v, want it back at %v", rid, after, err, before)
		}
	}
	e.refuse("")
	if a := e.confirm("retry", "pin-retry"); a.res.Result != grab.Confirmed {
		t.Fatalf("the retried confirm: %s", a.raw)
	}
	e.past(60)
	if n := e.reconcile().HoldsExpired; n != 1 {
		t.Fatalf("a pass past the holds returned %d, want the unconfirmed one", n)
	}
	if got := e.expiredCancels(); len(got) != 1 || got[e.rid("late")] != 1 {
		t.Fatalf("PAYMENT_EXPIRED cancels %v, want late's alone", got)
	}
	if h := e.hash(id); h.Remaining != 9 {
		t.Fatalf("remaining %d, want 9 (the confirmed grant stands)", h.Remaining)
	}
}

// Two confirms of one grant at once (a checkout that gave up on a slow one and sent
// it again): the second's acknowledged CONFIRM stands, and the first's failure
// afterwards does not put the hold back, so the grant is never returned as unpaid.
// A confirm of a cancelled grant answers ALREADY_RETURNED and records nothing.
func TestConcurrentConfirmsKeepTheAcknowledgedOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.promotion("twice", spec{total: 10, maxPerGrab: 1})
	e.heldGrab(t, "slow", "pin-slow", id, 60)
	entered, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	e.intercept(func(ev flow.Event) error {
		isFirst := false
		if ev.Kind == flow.Confirm {
			first.Do(func() { isFirst = true })
		}
		if !isFirst {
			return nil
		}
		close(entered)
		<-release
		return fmt.Errorf("test: the first CONFIRM timed out")
	})
	slow := make(chan answer, 1)
	go func() { slow <- e.confirm("slow", "pin-slow") }()
	<-entered
	if a := e.confirm("slow", "pin-slow"); a.status != http.StatusOK || a.res.Result != grab.Confirmed {
		t.Fatalf("the second confirm, the first still publishing: %d %s", a.status, a.raw)
	}
	close(release)
	if a := <-slow; a.status != http.StatusServiceUnavailable {
		t.Fatalf("the first confirm, its CONFIRM failed: %d %s", a.status, a.raw)
	}
	idx := e.shard(promo.RequestIndexKey(e.rid("slow")))
	for _, key := range []string{e.cfg.HoldsKey, promo.ConfirmingKey(e.cfg.HoldsKey)} {
		if err := idx.ZScore(ctx, key, e.rid("slow")).Err(); err != redis.Nil {
			t.Fatalf("%s still holds the confirmed grant (%v)", key, err)
		}
	}
	e.past(60)
	if n := e.reconcile().HoldsExpired; n != 0 {
		t.Fatalf("a pass past the hold returned %d; the grant was confirmed", n)
	}

	e.intercept(nil)
	e.heldGrab(t, "cancelled", "pin-cancelled", id, 60)
	if a := e.cancel("cancelled", "pin-cancelled"); a.res.Result != grab.Returned {
		t.Fatalf("cancel: %s", a.raw)
	}
	if a := e.confirm("cancelled", "pin-cancelled"); a.status != http.StatusConflict || a.res.Result != grab.AlreadyReturned {
		t.Fatalf("confirm of a cancelled grant: %d %s, want 409 ALREADY_RETURNED", a.status, a.raw)
	}
	for _, ev := range e.pub.Events() {
		if ev.Kind == flow.Confirm && ev.RequestID == e.rid("cancelled") {
			t.Fatal("a CONFIRM of a cancelled grant was published")
		}
	}
}
