package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/store"
)

func owed(t *testing.T, s *store.Store) int64 {
	t.Helper()
	return scalar(t, s, "SELECT COUNT(*) FROM owed_cancel")
}

// An owed CANCEL waits until its GRAB is in the log, is then written once, and is
// forgotten; one whose GRAB never comes is forgotten once it is older than keep.
func TestOwedCancelsSettleOnceTheirGrabIsLogged(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	create(t, s, spec("O", 100), time.Now())
	late := flowEvent(flow.Cancel, "late", "O", 2)
	late.Reason = "ROLLBACK"
	if err := s.Flows.OweCancels(ctx, []flow.Event{late, flowEvent(flow.Cancel, "never", "O", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flows.OweCancels(ctx, []flow.Event{late}); err != nil { // the reconciler's next try
		t.Fatalf("owing a CANCEL again: %v", err)
	}
	if err := s.Flows.OweCancels(ctx, []flow.Event{flowEvent(flow.Grab, "g", "O", 1)}); err == nil {
		t.Fatal("a GRAB was taken as an owed CANCEL")
	}
	if n, err := s.Flows.SettleOwedCancels(ctx, time.Hour); err != nil || n != 0 || owed(t, s) != 2 {
		t.Fatalf("before any GRAB: settled %d (%v), %d owed; want 0 and 2", n, err, owed(t, s))
	}

	// The sink writes the GRAB of "late": its CANCEL is then written and forgotten.
	grabLate := flowEvent(flow.Grab, "late", "O", 2)
	grabLate.OccurredAt = before(t, late, time.Second) // the GRAB its CANCEL gave back
	if _, err := s.Flows.InsertFlows(ctx, []flow.Event{grabLate}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Flows.SettleOwedCancels(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("with late's GRAB logged: settled %d (%v); want 1", n, err)
	}
	if g, err := s.Flows.GrantedByRecord(ctx, "O", 1); err != nil || g != 0 || remaining(t, s, "O") != 100 {
		t.Fatalf("the record grants %d (%v), remaining %d; want the GRAB netted by its CANCEL", g, err, remaining(t, s, "O"))
	}
	var reason string
	if err := s.DB().QueryRow("SELECT reason FROM grab_flow WHERE request_id = 'late' AND kind = 'CANCEL'").Scan(&reason); err != nil || reason != "ROLLBACK" {
		t.Fatalf("late's CANCEL in the log: reason %q (%v); want ROLLBACK", reason, err)
	}
	if n := owed(t, s); n != 1 {
		t.Fatalf("%d owed after settling late; want never's alone", n)
	}
	if n, err := s.Flows.SettleOwedCancels(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("settling again: %d (%v); want nothing", n, err)
	}

	// A two-item CANCEL owed whose items' GRABs arrive one at a time: each item is
	// settled against its own GRAB.
	create(t, s, spec("P", 100), time.Now())
	two := flowEvent(flow.Cancel, "two", "O", 1)
	two.Items = append(two.Items, flow.Item{PromoID: "P", Type: 1, Num: 3, Shard: 4})
	if err := s.Flows.OweCancels(ctx, []flow.Event{two}); err != nil {
		t.Fatal(err)
	}
	grabTwo := flowEvent(flow.Grab, "two", "P", 3)
	grabTwo.OccurredAt = before(t, two, time.Second) // before its CANCEL
	if _, err := s.Flows.InsertFlows(ctx, []flow.Event{grabTwo}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Flows.SettleOwedCancels(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("with one item's GRAB logged: settled %d (%v); want that item alone", n, err)
	}
	if g, _ := s.Flows.GrantedByRecord(ctx, "P", 1); g != 0 || owed(t, s) != 2 {
		t.Fatalf("P granted %d, %d owed; want 0, and never's and two's item of O still owed", g, owed(t, s))
	}

	// A requestId rolled back, retried and granted afresh: the later GRAB is not the
	// one the copy gave back, so the copy does not net it out.
	retried := flowEvent(flow.Cancel, "retried", "O", 1)
	retried.OccurredAt = flow.Stamp(time.Now().Add(-time.Minute))
	if err := s.Flows.OweCancels(ctx, []flow.Event{retried}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flows.InsertFlows(ctx, []flow.Event{flowEvent(flow.Grab, "retried", "O", 1)}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Flows.SettleOwedCancels(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("a copy older than the GRAB: settled %d (%v); want 0", n, err)
	}
	if g, _ := s.Flows.GrantedByRecord(ctx, "O", 1); g != 1 {
		t.Fatalf("O granted %d after the fresh grant; want 1", g)
	}
	if granted, err := s.Flows.Granted(ctx, "retried", "O", 1); err != nil || !granted {
		t.Fatalf("Granted(retried) = %v (%v); want the fresh grant held", granted, err)
	}
	if granted, err := s.Flows.Granted(ctx, "late", "O", 1); err != nil || granted {
		t.Fatalf("Granted(late) = %v (%v); want its GRAB netted", granted, err)
	}

	// The GRABs of the rest do not come: after keep, their copies go.
	time.Sleep(1100 * time.Millisecond)
	if _, err := s.Flows.SettleOwedCancels(ctx, time.Second); err != nil || owed(t, s) != 0 {
		t.Fatalf("a copy older than keep is still owed (%v)", err)
	}
}

// before is the stamp d before ev's own: a GRAB made before its CANCEL however long
// the steps between their making took (d before now could be after a CANCEL made
// more than d ago on a slow machine, and read as a later, fresh grant).
func before(t *testing.T, ev flow.Event, d time.Duration) string {
	t.Helper()
	at, err := time.Parse(flow.TimeFormat, ev.OccurredAt)
	if err != nil {
		t.Fatalf("the stamp of %s %s: %v", ev.Kind, ev.RequestID, err)
	}
	return flow.Stamp(at.Add(-d))
}
