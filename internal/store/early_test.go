package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
)

// A CANCEL that reaches the record before its GRAB (a GRAB dead-lettered and
// replayed later, or the two on different partitions) is kept, and nets out when
// the GRAB comes: the record then counts nothing sold, in either order, in one
// batch or two, redelivered or not. A CANCEL whose GRAB never comes moves nothing.
func TestACancelBeforeItsGrabNetsOutWhenTheGrabComes(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	create(t, s, spec("E", 100), time.Now())
	granted := func(want int64, when string) {
		t.Helper()
		if n, err := s.Flows.GrantedByRecord(ctx, "E", 1); err != nil || n != want {
			t.Fatalf("%s: granted by the record %d (%v), want %d", when, n, err, want)
		}
		if r := remaining(t, s, "E"); r != 100-want {
			t.Fatalf("%s: remaining %d, want %d", when, r, 100-want)
		}
	}
	if _, err := s.Flows.InsertFlows(ctx, []flow.Event{flowEvent(flow.Cancel, "late", "E", 4)}); err != nil {
		t.Fatal(err)
	}
	granted(0, "the CANCEL alone")
	if _, err := s.Flows.InsertFlows(ctx, []flow.Event{flowEvent(flow.Grab, "late", "E", 4)}); err != nil {
		t.Fatal(err)
	}
	granted(0, "its GRAB replayed after it")
	for range 2 { // redeliveries of both change nothing
		if _, err := s.Flows.InsertFlows(ctx, []flow.Event{flowEvent(flow.Cancel, "late", "E", 4), flowEvent(flow.Grab, "late", "E", 4)}); err != nil {
			t.Fatal(err)
		}
	}
	granted(0, "both redelivered")
	if _, err := s.Flows.InsertFlows(ctx, []flow.Event{flowEvent(flow.Cancel, "swapped", "E", 3), flowEvent(flow.Grab, "swapped", "E", 3),
		flowEvent(flow.Grab, "kept", "E", 2)}); err != nil {
		t.Fatal(err)
	}
	granted(2, "a CANCEL before its GRAB in one batch, and a grant")
	if _, err := s.Flows.InsertFlows(ctx, []flow.Event{flowEvent(flow.Cancel, "never", "E", 5)}); err != nil {
		t.Fatal(err)
	}
	granted(2, "a rollback's CANCEL whose GRAB never reached the record")
	if n := scalar(t, s, "SELECT COUNT(*) FROM grab_flow WHERE request_id IN ('late', 'swapped')"); n != 4 {
		t.Errorf("grab_flow holds %d rows of the two netted requests, want 4", n)
	}
	if n := scalar(t, s, "SELECT COUNT(*) FROM grab_flow_early"); n != 1 {
		t.Errorf("grab_flow_early holds %d CANCELs, want 1 (the one whose GRAB never came)", n)
	}
}
