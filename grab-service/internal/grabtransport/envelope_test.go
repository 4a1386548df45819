package grabtransport_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/lua"
)

// Envelope pools (docs/CONTRACT.md, "Envelope pools") on the real stack: every
// envelope handed out once, amounts in the answers and the events, all or nothing
// beside other items, replays, cancels and rollbacks giving back exactly the parts.

// pool creates an envelope pool of total envelopes summing to amount, each at least
// minAmount, split as promo-admin splits it, and returns its id and its parts in
// the order they are handed out.
func (e *env) pool(name string, total, amount, minAmount int64, s spec) (string, []int64) {
	e.t.Helper()
	s.total = total
	s.envelope = promo.SplitEnvelope(amount, minAmount, int(total), rand.New(rand.NewPCG(uint64(total), uint64(amount))))
	return e.promotion(name, s), s.envelope
}

// poolLeft is the pool's parts left by index, in the order the pool hands them out.
func (e *env) poolLeft(id string) []int {
	e.t.Helper()
	key := promo.Key(id, 1)
	members, err := e.shard(key).ZRange(context.Background(), promo.EnvelopeKey(key), 0, -1).Result()
	if err != nil {
		e.t.Fatalf("pool %s: %v", key, err)
	}
	out := make([]int, len(members))
	for i, m := range members {
		if out[i], _, err = lua.ParseEnvelopeMember(m); err != nil {
			e.t.Fatal(err)
		}
	}
	return out
}

// sumOf is the amount of the parts at idx.
func sumOf(parts []int64, idx ...int) int64 {
	var sum int64
	for _, i := range idx {
		sum += parts[i]
	}
	return sum
}

// span is the indexes from..to-1.
func span(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// eventOf is the acknowledged event of kind for requestId rid (made unique by
// grab); it fails the test unless there is exactly one.
func (e *env) eventOf(kind flow.Kind, rid string) flow.Event {
	e.t.Helper()
	var found []flow.Event
	for _, ev := range e.pub.Events() {
		if ev.Kind == kind && ev.RequestID == e.rid(rid) {
			found = append(found, ev)
		}
	}
	if len(found) != 1 {
		e.t.Fatalf("%d %s events of %s, want 1: %+v", len(found), kind, rid, found)
	}
	return found[0]
}

// amountOf is the amount item i of a GRANTED or RETURNED answer carries (-1 for none).
func amountOf(a answer, i int) int64 {
	if i >= len(a.res.Items) || a.res.Items[i].Amount == nil {
		return -1
	}
	return *a.res.Items[i].Amount
}

// wantPoolItem fails unless ev's item i took or gave back exactly parts idx.
func wantPoolItem(t *testing.T, ev flow.Event, i int, parts []int64, idx []int) {
	t.Helper()
	if i >= len(ev.Items) {
		t.Fatalf("%s of %s has %d items, want item %d", ev.Kind, ev.RequestID, len(ev.Items), i)
	}
	it := ev.Items[i]
	if !slices.Equal(it.Parts, idx) || it.Amount != sumOf(parts, idx...) {
		t.Fatalf("%s of %s: parts %v amount %d, want %v amount %d", ev.Kind, ev.RequestID, it.Parts, it.Amount, idx, sumOf(parts, idx...))
	}
}

// 700 buyers at once for a pool of 500: exactly 500 granted, their amounts summing
// exactly to the budget, no envelope twice, the rest SOLD_OUT; each GRAB event
// names the envelope its answer's amount is.
func TestPoolGrantsEveryEnvelopeOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const total, amount, buyers, workers = 500, 123_457, 700, 100
	id, parts := e.pool("pool-sale", total, amount, 20, spec{maxPerGrab: 1})
	var mu sync.Mutex
	granted := map[string]int64{} // requestId -> the amount answered
	var soldOut atomic.Int64
	buy := func(n int) {
		for attempt := 0; ; attempt++ {
			rid := fmt.Sprintf("ps-%d-%d", n, attempt)
			a := e.grab(grabBody(rid, fmt.Sprintf("pin-%d", n), fmt.Sprintf("10.40.%d.%d", n/250, n%250), id, 1))
			switch {
			case a.status == http.StatusOK && a.res.Result == grab.Granted && amountOf(a, 0) > 0:
				mu.Lock()
				granted[e.rid(rid)] = amountOf(a, 0)
				mu.Unlock()
			case a.status == http.StatusConflict && a.res.Result == grab.SoldOut:
				soldOut.Add(1)
			case a.status == http.StatusServiceUnavailable && a.res.Result == grab.Unavailable && attempt < 3:
				continue // a Kafka acknowledgement slower than its bound: rolled back, the envelope back
			default:
				t.Errorf("buyer %d: unexpected answer %d %s", n, a.status, a.raw)
			}
			return
		}
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				buy(n)
			}
		}()
	}
	for n := range buyers {
		jobs <- n
	}
	close(jobs)
	wg.Wait()

	if len(granted) != total || soldOut.Load() != buyers-total {
		t.Fatalf("granted %d, sold out %d: want %d and %d", len(granted), soldOut.Load(), total, buyers-total)
	}
	var sum int64
	for _, a := range granted {
		sum += a
	}
	if sum != amount {
		t.Errorf("the granted amounts sum to %d, want exactly %d", sum, amount)
	}
	given := make([]int, total) // times each envelope was handed out by a grant's GRAB
	grabs := 0
	for _, ev := range e.pub.Events() {
		a, ok := granted[ev.RequestID]
		if ev.Kind != flow.Grab || !ok {
			continue
		}
		grabs++
		if len(ev.Items) != 1 || len(ev.Items[0].Parts) != 1 {
			t.Fatalf("GRAB of %s: items %+v, want one envelope", ev.RequestID, ev.Items)
		}
		idx := ev.Items[0].Parts[0]
		given[idx]++
		if ev.Items[0].Amount != a || parts[idx] != a {
			t.Errorf("%s: answered %d, its GRAB says %d for envelope %d of %d", ev.RequestID, a, ev.Items[0].Amount, idx, parts[idx])
		}
	}
	if grabs != total {
		t.Errorf("%d GRAB events of the grants, want %d", grabs, total)
	}
	for idx, n := range given {
		if n != 1 {
			t.Errorf("envelope %d handed out %d times", idx, n)
		}
	}
	if h := e.hash(id); h.Remaining != 0 || h.EnvLeft != 0 || len(e.poolLeft(id)) != 0 {
		t.Errorf("after the sale: remaining %d, envLeft %d, %d envelopes left", h.Remaining, h.EnvLeft, len(e.poolLeft(id)))
	}
}

// promotionOn creates an ordinary promotion on shard (same) or off it, named from name.
func (e *env) promotionOn(name string, shard int, same bool, s spec) string {
	e.t.Helper()
	for i := 0; ; i++ {
		n := fmt.Sprintf("%s%d", name, i)
		if (ring.Default.Shard(promo.Key(n+"-"+e.suffix, 1)) == shard) == same {
			return e.promotion(n, s)
		}
	}
}

// A grab of a pool beside an ordinary promotion that refuses takes nothing from
// the pool, whether the two share a shard (one q.lua) or not (the take undone).
func TestPoolBesideARefusedItemTakesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const amount = 1000
	id, parts := e.pool("pool-multi", 5, amount, 50, spec{})
	shard := ring.Default.Shard(promo.Key(id, 1))
	for _, same := range []bool{true, false} {
		other := e.promotionOn(fmt.Sprintf("plain-%v-", same), shard, same, spec{total: 1})
		if a := e.grab(grabBody(fmt.Sprintf("sell-%v", same), "first", "10.41.0.1", other, 1)); a.res.Result != grab.Granted {
			t.Fatalf("selling %s out: %d %s", other, a.status, a.raw)
		}
		rid := fmt.Sprintf("both-%v", same)
		a := e.grab(grabBody(rid, "buyer", "10.41.0.2", id, 2, other, 1))
		if a.status != http.StatusConflict || a.res.Result != grab.SoldOut || a.res.FailedItem == nil || *a.res.FailedItem != 1 {
			t.Fatalf("same shard %v: want 409 SOLD_OUT of item 1, have %d %s", same, a.status, a.raw)
		}
		if h, left := e.hash(id), e.poolLeft(id); h.Remaining != 5 || h.EnvLeft != amount || !slices.Equal(left, span(0, 5)) {
			t.Fatalf("same shard %v: the pool after the refused grab: remaining %d, envLeft %d, left %v", same, h.Remaining, h.EnvLeft, left)
		}
		for _, ev := range e.pub.Events() {
			if ev.RequestID == e.rid(rid) {
				t.Fatalf("same shard %v: the refused grab published %+v", same, ev)
			}
		}
	}
	a := e.grab(grabBody("alone", "buyer", "10.41.0.2", id, 2))
	if a.res.Result != grab.Granted || amountOf(a, 0) != sumOf(parts, 0, 1) {
		t.Fatalf("the pool alone: %d %s, want GRANTED of envelopes 0 and 1 (%d)", a.status, a.raw, sumOf(parts, 0, 1))
	}
	wantPoolItem(t, e.eventOf(flow.Grab, "alone"), 0, parts, span(0, 2))
}

// A replay answers the grant's amount; a cancel gives back exactly its envelopes
// (its answer and CANCEL say which), and they are the next handed out; the status
// shows the budget left.
func TestPoolReplayCancelAndStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const amount = 10_000
	id, parts := e.pool("pool-cancel", 10, amount, 100, spec{maxPerGrab: 3})
	status := func() string {
		e.clock.Advance(time.Second) // past the status cache's life
		r := e.do("GET", "/v1/promotions/"+id+"/1/status", "", nil)
		if r.status != http.StatusOK {
			t.Fatalf("status: %d %s", r.status, r.raw)
		}
		return r.raw
	}
	if s := status(); !strings.Contains(s, fmt.Sprintf(`"remainingAmount":%d`, amount)) {
		t.Fatalf("status of a fresh pool: %s", s)
	}

	body := grabBody("pc-1", "alice", "10.42.0.1", id, 3)
	first := e.grab(body)
	if first.res.Result != grab.Granted || amountOf(first, 0) != sumOf(parts, 0, 1, 2) {
		t.Fatalf("grab: %d %s, want GRANTED of envelopes 0-2 (%d)", first.status, first.raw, sumOf(parts, 0, 1, 2))
	}
	wantPoolItem(t, e.eventOf(flow.Grab, "pc-1"), 0, parts, span(0, 3))
	if r := e.grab(body); r.status != http.StatusOK || r.res.Result != grab.Granted || amountOf(r, 0) != amountOf(first, 0) {
		t.Fatalf("replay: %d %s, want GRANTED with amount %d", r.status, r.raw, amountOf(first, 0))
	}
	if r := e.grab(grabBody("pc-2", "bob", "10.42.0.2", id, 2)); amountOf(r, 0) != sumOf(parts, 3, 4) {
		t.Fatalf("second grab: %d %s, want envelopes 3 and 4 (%d)", r.status, r.raw, sumOf(parts, 3, 4))
	}
	if s := status(); !strings.Contains(s, fmt.Sprintf(`"remainingAmount":%d`, amount-sumOf(parts, span(0, 5)...))) {
		t.Fatalf("status after 5 envelopes: %s", s)
	}

	c := e.cancel("pc-1", "alice")
	if c.status != http.StatusOK || c.res.Result != grab.Returned || amountOf(c, 0) != amountOf(first, 0) {
		t.Fatalf("cancel: %d %s, want RETURNED with amount %d", c.status, c.raw, amountOf(first, 0))
	}
	wantPoolItem(t, e.eventOf(flow.Cancel, "pc-1"), 0, parts, span(0, 3))
	if h, left := e.hash(id), e.poolLeft(id); h.EnvLeft != amount-sumOf(parts, 3, 4) || !slices.Equal(left, slices.Concat(span(0, 3), span(5, 10))) {
		t.Fatalf("after the cancel: envLeft %d, left %v", h.EnvLeft, left)
	}
	if r := e.cancel("pc-1", "alice"); r.res.Result != grab.AlreadyReturned {
		t.Fatalf("second cancel: %d %s", r.status, r.raw)
	}
	// The envelopes given back are of the lowest indexes: the next grab draws them.
	if r := e.grab(grabBody("pc-3", "carol", "10.42.0.3", id, 3)); amountOf(r, 0) != sumOf(parts, 0, 1, 2) {
		t.Fatalf("grab after the cancel: %d %s, want envelopes 0-2 again (%d)", r.status, r.raw, sumOf(parts, 0, 1, 2))
	}
	wantPoolItem(t, e.eventOf(flow.Grab, "pc-3"), 0, parts, span(0, 3))
}

// faults fails the GRAB's publish, or kills the grab after its take, on demand.
type faults struct {
	failPublish, killAfterTake atomic.Bool
}

func (f *faults) opt(_ *grab.Config, d *grab.Deps) {
	d.Publisher = &grabtest.Publisher{Next: d.Publisher, Fail: func(context.Context, []flow.Event) error {
		if f.failPublish.Load() {
			return errors.New("the broker refuses (test)")
		}
		return nil
	}}
	d.Fault = func(p string) error {
		if p == "after-take" && f.killAfterTake.Load() {
			return errKilled
		}
		return nil
	}
}

// A grab rolled back gives its envelopes back at once, and its CANCEL, paid by the
// reconciler from the ledger, names them: whether its GRAB was refused by Kafka
// (the live abort) or its process died after the take (the reconciler's abort).
func TestPoolRollbackGivesTheEnvelopesBack(t *testing.T) {
	t.Parallel()
	var f faults
	e := newEnv(t, f.opt)
	const amount = 700
	id, parts := e.pool("pool-rollback", 7, amount, 10, spec{})
	whole := func(when string) {
		t.Helper()
		if h, left := e.hash(id), e.poolLeft(id); h.Remaining != 7 || h.EnvLeft != amount || !slices.Equal(left, span(0, 7)) {
			t.Fatalf("%s: remaining %d, envLeft %d, left %v; want the whole pool", when, h.Remaining, h.EnvLeft, left)
		}
	}

	f.failPublish.Store(true)
	if a := e.grab(grabBody("rb-1", "dave", "10.43.0.1", id, 2)); a.status != http.StatusServiceUnavailable || a.res.Result != grab.Unavailable || a.res.Decision != grab.RolledBack {
		t.Fatalf("grab with Kafka refusing: %d %s", a.status, a.raw)
	}
	whole("after the refused publish")
	f.failPublish.Store(false)
	if st := e.reconcile(); st.Published != 1 {
		t.Fatalf("reconcile: %+v, want the rollback's CANCEL published", st)
	}
	cancel := e.eventOf(flow.Cancel, "rb-1")
	if cancel.Reason != "ROLLBACK" {
		t.Fatalf("the rollback's CANCEL: %+v", cancel)
	}
	wantPoolItem(t, cancel, 0, parts, span(0, 2))

	f.killAfterTake.Store(true)
	if a := e.grab(grabBody("rb-2", "erin", "10.43.0.2", id, 3)); a.status != http.StatusInternalServerError {
		t.Fatalf("the killed grab answered %d %s", a.status, a.raw)
	}
	f.killAfterTake.Store(false)
	if left := e.poolLeft(id); !slices.Equal(left, span(3, 7)) {
		t.Fatalf("the killed grab's take: left %v, want envelopes 3-6", left)
	}
	e.pastDeadline()
	if st := e.reconcile(); st.Aborted != 1 || st.Published != 1 {
		t.Fatalf("reconcile: %+v, want the killed take aborted and its CANCEL published", st)
	}
	wantPoolItem(t, e.eventOf(flow.Cancel, "rb-2"), 0, parts, span(0, 3))
	whole("after the reconciler's abort")

	a := e.grab(grabBody("rb-3", "frank", "10.43.0.3", id, 2))
	if a.res.Result != grab.Granted || amountOf(a, 0) != sumOf(parts, 0, 1) {
		t.Fatalf("grab after the rollbacks: %d %s, want envelopes 0 and 1 (%d)", a.status, a.raw, sumOf(parts, 0, 1))
	}
}

// A held grant of a pool not confirmed in time gives its envelopes back, and its
// PAYMENT_EXPIRED CANCEL names them.
func TestPoolHoldExpiryGivesTheEnvelopesBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const amount = 300
	id, parts := e.pool("pool-hold", 3, amount, 1, spec{})
	e.heldGrab(t, "ph-1", "gina", id, 60)
	wantPoolItem(t, e.eventOf(flow.Grab, "ph-1"), 0, parts, span(0, 1))
	e.past(60)
	if n := e.reconcile().HoldsExpired; n != 1 {
		t.Fatalf("the pass past the hold returned %d, want 1", n)
	}
	cancel := e.eventOf(flow.Cancel, "ph-1")
	if cancel.Reason != "PAYMENT_EXPIRED" {
		t.Fatalf("the hold's CANCEL: %+v", cancel)
	}
	wantPoolItem(t, cancel, 0, parts, span(0, 1))
	if h, left := e.hash(id), e.poolLeft(id); h.EnvLeft != amount || !slices.Equal(left, span(0, 3)) {
		t.Fatalf("after the hold ran out: envLeft %d, left %v", h.EnvLeft, left)
	}
}

// A take whose ledger entry is gone by its commit (its shard came back empty
// after the GRAB was acknowledged) is rolled back by a CANCEL that names the
// envelopes the take handed out: nothing in Redis owes it, and the record nets
// the GRAB's amount by it.
func TestPoolRollbackOfAGoneEntryNamesItsEnvelopes(t *testing.T) {
	t.Parallel()
	var e *env
	var id string
	forget := func(events []flow.Event) { // what a shard lost a moment after the take forgets
		for _, ev := range events {
			if ev.Kind == flow.Grab && ev.RequestID == e.rid("gone-1") {
				key := promo.Key(id, 1)
				e.shard(key).HDel(context.Background(), promo.LedgerKey(key), ev.RequestID)
				e.shard(key).ZRem(context.Background(), promo.PendingKey(key), ev.RequestID)
			}
		}
	}
	e = newEnv(t, func(_ *grab.Config, d *grab.Deps) {
		d.Publisher = &grabtest.Publisher{Next: d.Publisher, After: forget}
	})
	id, parts := e.pool("pool-gone", 4, 400, 5, spec{})
	if a := e.grab(grabBody("gone-1", "hank", "10.44.0.1", id, 2)); a.status != http.StatusServiceUnavailable || a.res.Decision != grab.RolledBack {
		t.Fatalf("grab whose entry went before its commit: %d %s", a.status, a.raw)
	}
	cancel := e.eventOf(flow.Cancel, "gone-1")
	if cancel.Reason != "ROLLBACK" {
		t.Fatalf("the rollback's CANCEL: %+v", cancel)
	}
	wantPoolItem(t, cancel, 0, parts, span(0, 2))
	wantPoolItem(t, e.eventOf(flow.Grab, "gone-1"), 0, parts, span(0, 2))
}
