package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
)

// The holds in the record: a held GRAB opens one, a CONFIRM closes it whichever
// comes first (degrade mode writes a confirm straight to MySQL, possibly before the
// sink has its GRAB), a CANCEL returns it; redeliveries change nothing; a CONFIRM
// writes no flow row and moves no stock.
func TestHoldsInTheRecordCommute(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	create(t, s, spec("H", 100), time.Now())
	until := time.Now().Add(time.Hour).UnixMilli()
	held := func(rid string) flow.Event {
		e := flowEvent(flow.Grab, rid, "H", 1)
		e.HoldUntil = until
		return e
	}
	confirm := func(rid string) flow.Event {
		e := flowEvent(flow.Confirm, rid, "H", 1)
		e.Reason = ""
		return e
	}
	batches := [][]flow.Event{
		{held("open"), held("paid-after"), confirm("paid-before"), flowEvent(flow.Grab, "plain", "H", 1)},
		{confirm("paid-after"), held("paid-before"), held("gone"), flowEvent(flow.Cancel, "gone", "H", 1)},
		{confirm("confirm-only")},
	}
	for range 2 {
		for _, b := range batches {
			if _, err := s.Flows.InsertFlows(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	open := map[string]int64{}
	for shard := range 16 {
		holds, err := s.Flows.Holds(ctx, shard, time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range holds {
			if h.Open {
				open[h.RequestID] = h.UntilMs
			}
			if want := ring.Default.Shard(promo.RequestIndexKey(h.RequestID)); want != shard {
				t.Errorf("%s found on index shard %d, want %d", h.RequestID, shard, want)
			}
		}
	}
	if len(open) != 1 || open["open"] != until {
		t.Errorf("open holds %v, want open's alone, until %d", open, until)
	}
	if holds, err := s.Flows.Holds(ctx, ring.Default.Shard(promo.RequestIndexKey("open")), time.Now().Add(2*time.Hour)); err != nil || len(holds) != 0 {
		t.Errorf("holds due before the bound: %v %v, want none", holds, err)
	}
	if n := scalar(t, s, "SELECT COUNT(*) FROM grab_flow WHERE request_id LIKE '%paid%' OR request_id = 'confirm-only'"); n != 2 {
		t.Errorf("%d flow rows of the confirmed grabs, want their 2 GRABs", n)
	}
	if r := remaining(t, s, "H"); r != 96 {
		t.Errorf("remaining %d, want 96 (five grants, one returned)", r)
	}
	bad := flowEvent(flow.Cancel, "x", "H", 1)
	bad.HoldUntil = until
	if _, err := flow.Decode(bad.AppendJSON(nil)); err == nil {
		t.Error("a CANCEL carrying holdUntil decoded")
	}
}
