package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/store"
)

func flowEvent(kind flow.Kind, rid, promoID string, num int64) flow.Event {
	e := flow.Event{EventID: string(kind) + "-" + rid, Kind: kind, RequestID: rid, Pin: "pin-" + rid, IP: "10.0.0.1",
		Items: []flow.Item{{PromoID: promoID, Type: 1, Num: num, Shard: 3}}, OccurredAt: flow.Stamp(time.Now())}
	if kind == flow.Grab {
		e.BodyHash = "h-" + rid
	} else {
		e.Reason = "USER_CANCELLED"
	}
	return e
}

// scalar reads one number.
func scalar(t *testing.T, s *store.Store, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.DB().QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// remaining reads the promotion row's remaining, which InsertFlows keeps in step.
func remaining(t *testing.T, s *store.Store, promoID string) int64 {
	t.Helper()
	return scalar(t, s, "SELECT remaining FROM promotion WHERE promo_id = ? AND promo_type = 1", promoID)
}

func TestInsertFlowsIsIdempotentAndNetsOnlyWhatItWrites(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	create(t, s, spec("F", 100), time.Now())
	batch := []flow.Event{
		flowEvent(flow.Grab, "r1", "F", 2),
		flowEvent(flow.Grab, "r2", "F", 3),
		flowEvent(flow.Cancel, "r2", "F", 3),     // its GRAB is earlier in the same batch
		flowEvent(flow.Cancel, "orphan", "F", 5), // no GRAB anywhere: the rollback of a grab the record never saw
		flowEvent(flow.Grab, "r1", "F", 2),       // a repeat within the batch
	}
	n, err := s.InsertFlows(ctx, batch)
	if err != nil || n != 3 {
		t.Fatalf("first write: want 3 rows, have %d (%v)", n, err)
	}
	if r := remaining(t, s, "F"); r != 98 {
		t.Errorf("remaining after grabs of 2 and 3 and a cancel of 3: want 98, have %d", r)
	}
	if n, err := s.InsertFlows(ctx, batch); err != nil || n != 0 {
		t.Errorf("redelivery: want 0 rows, have %d (%v)", n, err)
	}
	if n, err := s.InsertFlows(ctx, []flow.Event{flowEvent(flow.Cancel, "r1", "F", 2)}); err != nil || n != 1 {
		t.Errorf("a later cancel of r1: want 1 row, have %d (%v)", n, err)
	}
	if r := remaining(t, s, "F"); r != 100 {
		t.Errorf("remaining after everything was returned: want 100, have %d", r)
	}
	var hash, reason string
	if err := s.DB().QueryRow("SELECT body_hash FROM grab_flow WHERE request_id = 'r2' AND kind = 'GRAB'").Scan(&hash); err != nil || hash != "h-r2" {
		t.Errorf("r2's body hash: want h-r2, have %q (%v)", hash, err)
	}
	if err := s.DB().QueryRow("SELECT reason FROM grab_flow WHERE request_id = 'r2' AND kind = 'CANCEL'").Scan(&reason); err != nil || reason != "USER_CANCELLED" {
		t.Errorf("r2's cancel reason: want USER_CANCELLED, have %q (%v)", reason, err)
	}
}

// Two writers of the same events at once (a consumer-group rebalance hands a batch
// to a second sink): each retries until it succeeds, as the sink does, and every
// row and the remaining count land exactly once.
func TestInsertFlowsRacingWritersLandEachRowOnce(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	create(t, s, spec("G", 10_000), time.Now())
	var batch []flow.Event
	for i := range 600 { // more than one INSERT chunk
		batch = append(batch, flowEvent(flow.Grab, fmt.Sprintf("g%d", i), "G", 1))
	}
	var wg sync.WaitGroup
	written := make([]int, 4)
	for w := range written {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for attempt := 0; attempt < 50; attempt++ {
				n, err := s.InsertFlows(ctx, batch)
				if err == nil {
					written[w] = n
					return
				}
			}
			t.Errorf("writer %d: still failing after 50 attempts", w)
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range written {
		total += n
	}
	if total != len(batch) {
		t.Errorf("rows written by all writers: want %d, have %d (%v)", len(batch), total, written)
	}
	var rows int
	if err := s.DB().QueryRow("SELECT COUNT(*) FROM grab_flow WHERE promo_id = 'G'").Scan(&rows); err != nil || rows != len(batch) {
		t.Errorf("rows in grab_flow: want %d, have %d (%v)", len(batch), rows, err)
	}
	if r := remaining(t, s, "G"); r != 10_000-int64(len(batch)) {
		t.Errorf("remaining: want %d, have %d", 10_000-len(batch), r)
	}
}
