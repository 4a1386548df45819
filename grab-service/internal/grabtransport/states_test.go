package grabtransport_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/promostate"
	"github.com/flashsale/platform/internal/promostate/statetest"
	"github.com/flashsale/platform/lua"
)

// stateEvents is testenv.StateEvents of the env's broker and promotions.
func (e *env) stateEvents(want int) []string {
	e.t.Helper()
	return statetest.Events(e.t, e.kafka.ListenAddrs(), e.suffix, want)
}

func (e *env) outboxLen() int64 {
	var n int64
	for _, c := range e.shards {
		n += c.ZCard(context.Background(), e.cfg.StateOutboxKey).Val()
	}
	return n
}

// TestPromoStateEventsFromTheGrabPath: a sale that sells out, is restocked by a
// cancel and sells out again announces each change once, from the answers of the
// scripts that made them, and leaves nothing in the outbox.
func TestPromoStateEventsFromTheGrabPath(t *testing.T) {
	e := newEnv(t)
	id := e.promotion("st", spec{total: 2})
	for i := range 3 { // the third is refused SOLD_OUT and changes nothing
		e.grab(grabBody(fmt.Sprint("r", i), fmt.Sprint("p", i), "10.0.0.1", id, 1))
	}
	if a := e.cancel("r0", "p0"); a.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", a.status, a.raw)
	}
	if a := e.grab(grabBody("r9", "p9", "10.0.0.1", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("grab after the cancel: %d %s", a.status, a.raw)
	}
	have := e.stateEvents(3)
	want := []string{"st SOLD_OUT", "st RESTOCKED", "st SOLD_OUT"}
	if !slices.Equal(have, want) {
		t.Fatalf("promo-state: %v, want %v", have, want)
	}
	waitFor(t, "the outbox to empty", func() bool { return e.outboxLen() == 0 })
}

// TestBucketedSaleAnnouncesItsState: a sale in four buckets announces SOLD_OUT
// when its last bucket empties (not before, though three empty earlier), RESTOCKED
// when a cancel refills one, and SOLD_OUT again: once each, like an ordinary sale,
// and nothing is left in the outboxes.
func TestBucketedSaleAnnouncesItsState(t *testing.T) {
	e := newEnv(t)
	id, _ := e.bucketed("bst", 4, spec{total: 4, maxPerGrab: 1})
	grabOne := func(rid string, want grab.Outcome) {
		t.Helper()
		if a := e.grab(grabBody(rid, "p-"+rid, "10.0.0.1", id, 1)); a.res.Result != want {
			t.Fatalf("grab %s: %d %s, want %s", rid, a.status, a.raw, want)
		}
	}
	for i := range 4 {
		grabOne(fmt.Sprint("r", i), grab.Granted)
	}
	grabOne("r4", grab.SoldOut)
	if a := e.cancel("r1", "p-r1"); a.res.Result != grab.Returned {
		t.Fatalf("cancel: %d %s", a.status, a.raw)
	}
	grabOne("r5", grab.Granted)
	have := e.stateEvents(3)
	if want := []string{"bst SOLD_OUT", "bst RESTOCKED", "bst SOLD_OUT"}; !slices.Equal(have, want) {
		t.Fatalf("promo-state: %v, want %v", have, want)
	}
	waitFor(t, "the outboxes to empty", func() bool { return e.outboxLen() == 0 })
}

// TestPromoStateEventsAfterACrash: a change whose script ran but whose process died
// before publishing (the script is run here directly, as the dead process did) is
// published by the reconciler once its publisher's grace is over; ENDED is
// announced by the reconciler for a promotion the record says has ended, once,
// and by q.lua when a grab comes first.
func TestPromoStateEventsAfterACrash(t *testing.T) {
	var ended []string
	e := newEnv(t, func(_ *grab.Config, d *grab.Deps) {
		d.EndedPromotionKeys = func(context.Context) ([]string, error) { return ended, nil }
	})
	crashed := e.promotion("crashed", spec{total: 1})
	key := promo.Key(crashed, 1)
	now := e.clock.Now()
	r, err := lua.Grab(context.Background(), e.shard(key), lua.GrabCall{NowMs: now.UnixMilli(), DeadlineMs: now.Add(time.Second).UnixMilli(),
		RequestID: e.rid("dead"), BodyHash: "h", Pin: "p", IP: "i", RateFactorPermille: 1000,
		Items: []lua.GrabItem{{Key: key, Num: 1}}, Outbox: e.cfg.StateOutboxKey})
	if err != nil || len(r.Changes) != 1 {
		t.Fatalf("grab: %+v %v", r, err)
	}
	endsSoon := e.promotion("ends", spec{total: 5, end: now.Add(time.Minute)})
	grabbed := e.promotion("grabbed", spec{total: 5, end: now.Add(time.Minute)})
	ended = []string{promo.Key(endsSoon, 1)}

	e.clock.Rewind(now) // the pass below must fall within the grace, however slow the machine
	if _, err := e.rec.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := e.outboxLen(); n != 1 {
		t.Fatalf("a pass within the publisher's grace took the change: %d left, want 1", n)
	}
	e.clock.Advance(time.Minute + promostate.StateSweepGrace)
	if a := e.grab(grabBody("late", "p", "10.0.0.1", grabbed, 1)); a.res.Result != grab.Ended {
		t.Fatalf("grab after the end: %d %s", a.status, a.raw)
	}
	for range 2 { // the second pass announces nothing again
		st, err := e.rec.Reconcile(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pass: %+v", st)
	}
	// The dead process's take, never committed, is aborted by the reconciler: its
	// unit goes back, and the promotion is restocked.
	have := e.stateEvents(4)
	want := []string{"crashed SOLD_OUT", "crashed RESTOCKED", "ends ENDED", "grabbed ENDED"}
	if !slices.Equal(have, want) {
		t.Fatalf("promo-state: %v, want %v", have, want)
	}
	if n := e.outboxLen(); n != 0 {
		t.Fatalf("%d changes left in the outbox", n)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
