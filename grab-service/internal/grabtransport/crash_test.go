package grabtransport_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

var errKilled = errors.New("process killed at the fault point")

// crashAt makes the grab path stop dead at point, as a
// process killed there would: nothing after the point runs, no clean-up either.
func crashAt(point string) envOpt {
	return func(cfg *grab.Config, d *grab.Deps) {
		if point == "after-claim" {
			cfg.FoldClaim = false // a claim made with the take has no moment after it
		}
		d.Fault = func(p string) error {
			if p == point {
				return errKilled
			}
			return nil
		}
	}
}

func (e *env) ledger(id, rid string) lua.LedgerEntry {
	e.t.Helper()
	key := promo.Key(id, 1)
	entry, found, err := lua.ReadLedger(context.Background(), e.shard(key), key, e.rid(rid))
	if err != nil || !found {
		e.t.Fatalf("ledger %s %s: found=%v err=%v", key, rid, found, err)
	}
	return entry
}

func (e *env) reconcile() grab.ReconcileStats {
	e.t.Helper()
	st, err := e.rec.Reconcile(context.Background())
	if err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	return st
}

// pastDeadline moves the clock beyond every open take's deadline and margin.
func (e *env) pastDeadline() {
	e.clock.Advance(e.cfg.AnswerTimeout + e.cfg.ReconcileMargin + time.Second)
}

// Killed after q.lua took stock, before the GRAB was sent: the reconciler finds
// nothing in the record, returns the take and publishes the rollback.
func TestCrashBeforePublishIsReturned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, crashAt("after-take"))
	id := e.promotion("crash-a", spec{total: 5})
	if r := e.grab(grabBody("c-1", "alice", "10.8.0.1", id, 2)); r.status != http.StatusInternalServerError {
		t.Fatalf("the killed grab answered %d %s", r.status, r.raw)
	}
	if h := e.hash(id); h.Remaining != 3 || e.ledger(id, "c-1").State != lua.LedgerPending {
		t.Fatalf("want the take open: remaining %d, entry %+v", h.Remaining, e.ledger(id, "c-1"))
	}
	if st := e.reconcile(); st.Committed+st.Aborted+st.Published != 0 {
		t.Fatalf("before the deadline the reconciler must wait, did %+v", st)
	}
	e.pastDeadline()
	if st := e.reconcile(); st.Aborted != 1 || st.Published != 1 {
		t.Fatalf("reconcile: %+v, want one abort and its CANCEL", st)
	}
	if h := e.hash(id); h.Remaining != 5 || e.held(id, "pin", "alice") != 0 || e.held(id, "ip", "10.8.0.1") != 0 {
		t.Fatalf("after reconcile: remaining %d, pin %d", h.Remaining, e.held(id, "pin", "alice"))
	}
	if s := e.ledger(id, "c-1").State; s != lua.LedgerAbortRecorded {
		t.Fatalf("ledger state %s, want X", s)
	}
	evs := e.pub.Events()
	if len(evs) != 1 || evs[0].Kind != flow.Cancel || evs[0].Reason != "ROLLBACK" {
		t.Fatalf("events %+v, want one CANCEL ROLLBACK", evs)
	}
	if st := e.reconcile(); st.Committed+st.Aborted+st.Published != 0 {
		t.Fatalf("a second pass must find nothing, did %+v", st)
	}
}

// Killed after Kafka acknowledged the GRAB, before the commit: once the record
// holds the GRAB the take is committed, never returned.
func TestCrashAfterPublishIsCommittedFromTheRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t, crashAt("after-publish"))
	id := e.promotion("crash-b", spec{total: 5})
	e.grab(grabBody("c-2", "bob", "10.8.0.2", id, 1))
	if _, err := e.db.InsertFlows(context.Background(), e.pub.Events()); err != nil { // the flow sink's write
		t.Fatal(err)
	}
	e.pastDeadline()
	if st := e.reconcile(); st.Committed != 1 || st.Aborted != 0 {
		t.Fatalf("reconcile: %+v, want one commit", st)
	}
	if h := e.hash(id); h.Remaining != 4 || e.ledger(id, "c-2").State != lua.LedgerCommitted {
		t.Fatalf("want the grant kept: remaining %d, entry %+v", h.Remaining, e.ledger(id, "c-2"))
	}
	if n, _ := e.db.GrantedByRecord(context.Background(), id, 1); n != 1 {
		t.Fatalf("record grants %d, want 1", n)
	}
}

// A take the record holds as returned is returned, though its GRAB is there: a
// Redis failover lost the abort of the take (the replica brings it back pending),
// whose rollback CANCEL is in the log (d-1) or still owed, copied to the owed list
// (d-2). Committing it would keep a unit the buyer was told he did not get.
func TestPendingTakeWithARecordedCancelIsReturned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, crashAt("after-publish"))
	ctx := context.Background()
	id := e.promotion("crash-d", spec{total: 5})
	e.grab(grabBody("d-1", "dora", "10.8.0.4", id, 1))
	e.grab(grabBody("d-2", "dan", "10.8.0.5", id, 2))
	grabs := e.pub.Events()
	if _, err := e.db.InsertFlows(ctx, grabs); err != nil { // the flow sink's write
		t.Fatal(err)
	}
	rollback := func(ev flow.Event) flow.Event {
		ev.EventID, ev.Kind, ev.Reason, ev.BodyHash = ev.EventID+"-rb", flow.Cancel, "ROLLBACK", ""
		return ev
	}
	for _, ev := range grabs {
		switch ev.RequestID {
		case e.rid("d-1"):
			if _, err := e.db.InsertFlows(ctx, []flow.Event{rollback(ev)}); err != nil {
				t.Fatal(err)
			}
		case e.rid("d-2"):
			if err := e.db.OweCancels(ctx, []flow.Event{rollback(ev)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.pastDeadline()
	if st := e.reconcile(); st.Committed != 0 || st.Aborted != 2 {
		t.Fatalf("reconcile: %+v, want both takes returned", st)
	}
	if h := e.hash(id); h.Remaining != 5 {
		t.Fatalf("remaining %d after both takes were returned, want 5", h.Remaining)
	}
	if _, err := e.db.InsertFlows(ctx, e.pub.Events()); err != nil { // the sink writes the reconciler's CANCELs
		t.Fatal(err)
	}
	if _, err := e.db.SettleOwedCancels(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.db.GrantedByRecord(ctx, id, 1); n != 0 {
		t.Fatalf("record grants %d, want 0", n)
	}
}

// Killed after the ack while the record lags: the take is returned and the CANCEL
// nets out the GRAB once the sink writes both, so record and Redis agree.
func TestCrashAfterPublishWithLaggingRecordNetsOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, crashAt("after-publish"))
	id := e.promotion("crash-c", spec{total: 5})
	e.grab(grabBody("c-3", "carol", "10.8.0.3", id, 2))
	e.pastDeadline()
	if st := e.reconcile(); st.Aborted != 1 || st.Published != 1 {
		t.Fatalf("reconcile: %+v, want one abort and its CANCEL", st)
	}
	if _, err := e.db.InsertFlows(context.Background(), e.pub.Events()); err != nil {
		t.Fatal(err)
	}
	granted, _ := e.db.GrantedByRecord(context.Background(), id, 1)
	if h := e.hash(id); granted != 0 || h.Remaining != 5 {
		t.Fatalf("record grants %d, Redis remaining %d: want 0 and 5", granted, h.Remaining)
	}
}

// ackLost hands every publish to the broker and then, for the first GRAB, says it
// failed: an acknowledgement lost after the broker wrote the event (a timeout).
func ackLost(_ *grab.Config, d *grab.Deps) {
	var once atomic.Bool
	d.Publisher = &grabtest.Publisher{Next: d.Publisher, LoseAck: func(events []flow.Event) error {
		if events[0].Kind == flow.Grab && once.CompareAndSwap(false, true) {
			return errors.New("kafka: request timed out (the broker wrote the batch)")
		}
		return nil
	}}
}

// The publish failed but the broker holds the GRAB (an ambiguous acknowledgement):
// the grab is answered as not granted and its stock is back at once, and the
// rollback is a recorded fact of its own, a ROLLBACK CANCEL after the GRAB under the
// same key, so the record nets the grant out whichever way the acknowledgement went.
// The failure does not poison the refusal cache: the next buyer is granted.
func TestAmbiguousAcknowledgementIsNettedOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, longCaches, ackLost)
	id := e.promotion("ambiguous", spec{total: 5})
	if r := e.grab(grabBody("amb-1", "alice", "10.15.0.1", id, 2)); r.status != http.StatusServiceUnavailable || r.res.Result != grab.Unavailable {
		t.Fatalf("grab whose acknowledgement was lost: want 503 UNAVAILABLE, have %d %s", r.status, r.raw)
	}
	if h := e.hash(id); h.Remaining != 5 {
		t.Fatalf("remaining %d after the rollback, want 5 at once", h.Remaining)
	}
	if r := e.grab(grabBody("amb-2", "bob", "10.15.0.2", id, 1)); r.res.Result != grab.Granted {
		t.Fatalf("the next buyer after a failed publish: want GRANTED, have %s", r.raw)
	}
	st := e.reconcile() // publishes the CANCEL the abort owes

	var kinds []flow.Kind // in the order the broker took them; the message key is the requestId
	for _, ev := range e.pub.Events() {
		if ev.RequestID == e.rid("amb-1") {
			kinds = append(kinds, ev.Kind)
			if ev.Kind == flow.Cancel && ev.Reason != "ROLLBACK" {
				t.Errorf("the rollback's CANCEL has reason %q, want ROLLBACK", ev.Reason)
			}
		}
	}
	if len(kinds) != 2 || kinds[0] != flow.Grab || kinds[1] != flow.Cancel {
		t.Fatalf("the broker holds %v for the rolled-back grab, want [GRAB CANCEL] (reconcile %+v)", kinds, st)
	}
	if st := e.ledger(id, "amb-1").State; st != lua.LedgerAbortRecorded {
		t.Errorf("ledger state %q, want X (aborted, its CANCEL recorded)", st)
	}
	if _, err := e.db.InsertFlows(context.Background(), e.pub.Events()); err != nil {
		t.Fatal(err)
	}
	granted, err := e.db.GrantedByRecord(context.Background(), id, 1)
	if h := e.hash(id); err != nil || granted != 1 || h.Remaining != 4 {
		t.Fatalf("record grants %d (%v), Redis remaining %d: want 1 and 4 (bob's unit alone)", granted, err, h.Remaining)
	}
}
