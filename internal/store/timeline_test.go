package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/store"
)

// The timeline sums the flow log's units per second, live and archived rows
// alike, and names the first moment the units granted and not returned reached
// the total.
func TestTimelineSumsTheFlowLogPerSecond(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	create(t, s, spec("TL", 5), time.Now())
	t0 := time.Date(2030, 1, 1, 0, 0, 10, 0, time.UTC)
	at := func(e flow.Event, d time.Duration) flow.Event { e.OccurredAt = flow.Stamp(t0.Add(d)); return e }
	events := []flow.Event{
		at(flowEvent(flow.Grab, "tl-1", "TL", 1), 100*time.Millisecond),
		at(flowEvent(flow.Grab, "tl-2", "TL", 2), 900*time.Millisecond),
		at(flowEvent(flow.Cancel, "tl-2", "TL", 2), 2*time.Second),
		at(flowEvent(flow.Grab, "tl-3", "TL", 3), 3*time.Second+500*time.Millisecond),
		at(flowEvent(flow.Grab, "tl-4", "TL", 1), 4*time.Second), // the fifth unit not returned: sold out
		at(flowEvent(flow.Grab, "other", "TL2", 9), time.Second),
	}
	if _, err := s.Flows.InsertFlows(ctx, events); err != nil {
		t.Fatal(err)
	}
	// The first two rows archived, as recovery archive moves them.
	if _, err := s.DB().Exec(`INSERT INTO grab_flow_archive SELECT * FROM grab_flow WHERE request_id IN ('tl-1', 'tl-2') AND kind = 'GRAB'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(`DELETE FROM grab_flow WHERE request_id IN ('tl-1', 'tl-2') AND kind = 'GRAB'`); err != nil {
		t.Fatal(err)
	}
	tl, err := s.Promotions.Timeline(ctx, store.ID{PromoID: "TL", Type: 1}, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := "10s+3-0 12s+0-2 13s+3-0 14s+1-0"
	if have := render(tl.Buckets); have != want || tl.StepSeconds != 1 || tl.Granted != 7 || tl.Cancelled != 2 {
		t.Errorf("timeline: step %d granted %d cancelled %d buckets %s, want step 1, 7, 2, %s", tl.StepSeconds, tl.Granted, tl.Cancelled, have, want)
	}
	if tl.SoldOutAt == nil || !tl.SoldOutAt.Equal(t0.Add(4*time.Second)) {
		t.Errorf("sold out at %v, want %v", tl.SoldOutAt, t0.Add(4*time.Second))
	}
	if tl, err := s.Promotions.Timeline(ctx, store.ID{PromoID: "TL", Type: 1}, 6); err != nil || tl.SoldOutAt != nil {
		t.Errorf("against a total never reached: sold out at %v (%v)", tl.SoldOutAt, err)
	}
	if tl, err := s.Promotions.Timeline(ctx, store.ID{PromoID: "NONE", Type: 1}, 5); err != nil || len(tl.Buckets) != 0 || tl.Buckets == nil {
		t.Errorf("a promotion without flows: %+v %v", tl, err)
	}
}

// A sale longer than MaxTimelineBuckets seconds comes in wider buckets, never more
// than MaxTimelineBuckets of them.
func TestTimelineStepBoundsTheBuckets(t *testing.T) {
	t.Parallel()
	lo := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		span time.Duration
		want int64
	}{{0, 1}, {599 * time.Second, 1}, {600 * time.Second, 2}, {time.Hour, 10}, {30 * 24 * time.Hour, 7200}, {3 * 365 * 24 * time.Hour, 157944}} {
		step := store.TimelineStep(lo.Add(500*time.Millisecond), lo.Add(c.span))
		buckets := lo.Add(c.span).Unix()/step - lo.Unix()/step + 1
		if step != c.want || buckets > store.MaxTimelineBuckets {
			t.Errorf("span %v: step %d (%d buckets), want %d", c.span, step, buckets, c.want)
		}
	}
	s := open(t)
	ctx := context.Background()
	var events []flow.Event
	for i := range 50 { // one grab every 40 s for 33 minutes: 5 s buckets
		e := flowEvent(flow.Grab, fmt.Sprintf("wide-%d", i), "WIDE", 1)
		e.OccurredAt = flow.Stamp(lo.Add(time.Duration(i) * 40 * time.Second))
		events = append(events, e)
	}
	if _, err := s.Flows.InsertFlows(ctx, events); err != nil {
		t.Fatal(err)
	}
	tl, err := s.Promotions.Timeline(ctx, store.ID{PromoID: "WIDE", Type: 1}, 1000)
	if err != nil || tl.StepSeconds != 5 || len(tl.Buckets) != 50 || tl.Granted != 50 || !tl.Buckets[1].At.Equal(lo.Add(40*time.Second)) {
		t.Errorf("wide timeline: step %d, %d buckets, granted %d, %v", tl.StepSeconds, len(tl.Buckets), tl.Granted, err)
	}
}

func render(bs []store.TimelineBucket) string {
	out := ""
	for i, b := range bs {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%ds+%d-%d", b.At.Second(), b.Granted, b.Cancelled)
	}
	return out
}
