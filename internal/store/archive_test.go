package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/store"
)

// ended creates a promotion whose sale ended at end, with grabs flow rows (and a
// CANCEL of every fifth), and returns its id.
func ended(t *testing.T, s *store.Store, id string, end time.Time, grabs int) store.ID {
	t.Helper()
	sp := spec(id, 1000)
	sp.StartAt, sp.EndAt = end.Add(-time.Hour), end
	p := create(t, s, sp, end.Add(-2*time.Hour))
	var evs []flow.Event
	for i := range grabs {
		rid := fmt.Sprintf("%s-%d", id, i)
		evs = append(evs, flowEvent(flow.Grab, rid, id, 1))
		if i%5 == 0 {
			evs = append(evs, flowEvent(flow.Cancel, rid, id, 1))
		}
	}
	if _, err := s.Flows.InsertFlows(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	return p.ID()
}

// The archive moves the rows of promotions ended before the cutoff, and only
// those, out of grab_flow, a batch at a time; a run cut short is finished by the
// next; the rebuild no longer lists them and reads the others as before; settled
// holds older than the cutoff are purged, recent ones kept.
func TestArchiveMovesWhatEndedLongAgo(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	now := time.Now()
	old := ended(t, s, "old", now.Add(-40*24*time.Hour), 25)
	recent := ended(t, s, "recent", now.Add(-24*time.Hour), 12)
	live := ended(t, s, "live", now.Add(24*time.Hour), 7)
	before := map[store.ID]store.FlowCounters{}
	for _, id := range []store.ID{old, recent, live} {
		c, err := s.Rebuild.FlowCounters(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = c
	}
	cutoff := now.Add(-30 * 24 * time.Hour)

	if _, err := s.Archive.MoveFlows(ctx, recent, 10); err == nil {
		t.Fatal("rows of a promotion not marked archived were moved")
	}
	if n, err := s.Archive.MarkEnded(ctx, cutoff); err != nil || n != 1 {
		t.Fatalf("mark: %d %v, want 1", n, err)
	}
	live1, err := s.Rebuild.LivePromotions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range live1 {
		if p.ID() == old {
			t.Fatal("the rebuild still lists the archived promotion")
		}
	}
	if len(live1) != 2 {
		t.Fatalf("the rebuild lists %d promotions, want the 2 not archived", len(live1))
	}

	// One batch, then a "new run" that finishes the job from what is left.
	if n, err := s.Archive.MoveFlows(ctx, old, 10); err != nil || n != 10 {
		t.Fatalf("first batch: %d %v", n, err)
	}
	left, err := s.Archive.ArchivedRows(ctx)
	if err != nil || left[old] != 20 || len(left) != 1 {
		t.Fatalf("left after one batch: %v %v, want 20 rows of %s", left, err, old)
	}
	for {
		n, err := s.Archive.MoveFlows(ctx, old, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if n, err := s.Archive.ArchivedFlowCount(ctx, old); err != nil || n != 30 {
		t.Fatalf("archived rows of %s: %d %v, want 30", old, n, err)
	}
	if got := scalar(t, s, `SELECT COUNT(*) FROM grab_flow WHERE promo_id = 'old'`); got != 0 {
		t.Fatalf("%d rows of the archived promotion left in grab_flow", got)
	}
	for _, id := range []store.ID{recent, live} {
		c, err := s.Rebuild.FlowCounters(ctx, id)
		if err != nil || c.Net() != before[id].Net() || c.Granted != before[id].Granted {
			t.Fatalf("%s after the archive: %+v %v, want %+v", id, c, err, before[id])
		}
	}
	// A second run finds nothing to do.
	if n, err := s.Archive.MarkEnded(ctx, cutoff); err != nil || n != 0 {
		t.Fatalf("second mark: %d %v", n, err)
	}
	if left, err := s.Archive.ArchivedRows(ctx); err != nil || len(left) != 0 {
		t.Fatalf("second run: rows left %v %v", left, err)
	}
}

func TestArchivePurgesSettledHolds(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	now := time.Now()
	create(t, s, spec("H", 100), now)
	hold := func(rid string, until time.Time) flow.Event {
		e := flowEvent(flow.Grab, rid, "H", 1)
		e.HoldUntil = until.UnixMilli()
		return e
	}
	if _, err := s.Flows.InsertFlows(ctx, []flow.Event{hold("old", now.Add(-40*24*time.Hour)), hold("open", now.Add(time.Hour)),
		hold("lapsed-yesterday", now.Add(-24*time.Hour))}); err != nil {
		t.Fatal(err)
	}
	n, err := s.Archive.PurgeHolds(ctx, now.Add(-30*24*time.Hour), 100)
	if err != nil || n != 1 {
		t.Fatalf("purge: %d %v, want 1", n, err)
	}
	if got := scalar(t, s, `SELECT COUNT(*) FROM grab_hold`); got != 2 {
		t.Fatalf("%d holds left, want the open one and yesterday's", got)
	}
}
