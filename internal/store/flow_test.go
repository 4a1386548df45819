package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

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
	n, err := s.Flows.InsertFlows(ctx, batch)
	if err != nil || n != 3 {
		t.Fatalf("first write: want 3 rows, have %d (%v)", n, err)
	}
	if r := remaining(t, s, "F"); r != 98 {
		t.Errorf("remaining after grabs of 2 and 3 and a cancel of 3: want 98, have %d", r)
	}
	if n, err := s.Flows.InsertFlows(ctx, batch); err != nil || n != 0 {
		t.Errorf("redelivery: want 0 rows, have %d (%v)", n, err)
	}
	if n, err := s.Flows.InsertFlows(ctx, []flow.Event{flowEvent(flow.Cancel, "r1", "F", 2)}); err != nil || n != 1 {
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
				n, err := s.Flows.InsertFlows(ctx, batch)
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

// A batch larger than InsertFlows' largest statement (512 rows, 512 request ids, 64
// promotions), holding rows stored by an earlier batch, repeats of its own rows and
// CANCELs of GRABs stored before it, in it, and nowhere: each row lands once, in the
// batch's order, and every promotion's remaining moves by exactly what was written.
func TestInsertFlowsLargeBatchWithDuplicatesWritesEachRowOnce(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	const promos = 70
	for p := range promos {
		create(t, s, spec(fmt.Sprintf("L%d", p), 1000), time.Now())
	}
	twoItems := func(kind flow.Kind, i int) flow.Event {
		e := flowEvent(kind, fmt.Sprintf("q%d", i), fmt.Sprintf("L%d", i%promos), 1)
		e.Items = append(e.Items, flow.Item{PromoID: fmt.Sprintf("L%d", (i+1)%promos), Type: 1, Num: 2, Shard: 5})
		return e
	}
	var earlier []flow.Event
	for i := range 100 {
		earlier = append(earlier, twoItems(flow.Grab, i))
	}
	if n, err := s.Flows.InsertFlows(ctx, earlier); err != nil || n != 200 {
		t.Fatalf("earlier batch: want 200 rows, have %d (%v)", n, err)
	}
	// 600 GRABs of two items (1,200 rows), of which the first 100 are stored already;
	// a repeat of every tenth; a CANCEL of every seventh, whose GRAB is stored, in
	// this batch, or (past 600) nowhere.
	var batch []flow.Event
	want := 0
	for i := range 600 {
		batch = append(batch, twoItems(flow.Grab, i))
		if i >= 100 {
			want += 2
		}
		if i%10 == 0 {
			batch = append(batch, twoItems(flow.Grab, i))
		}
	}
	for i := 0; i < 700; i += 7 {
		batch = append(batch, twoItems(flow.Cancel, i))
		if i < 600 {
			want += 2
		}
	}
	n, err := s.Flows.InsertFlows(ctx, batch)
	if err != nil || n != want {
		t.Fatalf("large batch: want %d rows, have %d (%v)", want, n, err)
	}
	if n, err := s.Flows.InsertFlows(ctx, batch); err != nil || n != 0 {
		t.Fatalf("large batch again: want 0 rows, have %d (%v)", n, err)
	}
	if rows := scalar(t, s, "SELECT COUNT(*) FROM grab_flow"); rows != int64(200+want) {
		t.Errorf("rows in grab_flow: want %d, have %d", 200+want, rows)
	}
	if dups := scalar(t, s, "SELECT COUNT(*) FROM (SELECT 1 FROM grab_flow GROUP BY request_id, kind, promo_id, promo_type HAVING COUNT(*) > 1) d"); dups != 0 {
		t.Errorf("%d keys written twice", dups)
	}
	// Remaining: each promotion's total less what the log nets for it.
	for p := range promos {
		id := fmt.Sprintf("L%d", p)
		granted, err := s.Flows.GrantedByRecord(ctx, id, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r := remaining(t, s, id); r != 1000-granted {
			t.Errorf("%s: remaining %d, granted by the record %d, total 1000", id, r, granted)
		}
	}
	// The batch's order is the log's: a request's GRAB before its CANCEL, items in order.
	if bad := scalar(t, s, `SELECT COUNT(*) FROM grab_flow c JOIN grab_flow g ON g.request_id = c.request_id
 AND g.promo_id = c.promo_id AND g.kind = 'GRAB' WHERE c.kind = 'CANCEL' AND c.id < g.id`); bad != 0 {
		t.Errorf("%d CANCEL rows precede their GRAB", bad)
	}
	_, _, items, err := s.Flows.GrabItems(ctx, "q150")
	if err != nil || len(items) != 2 || items[0].PromoID != "L10" || items[1].PromoID != "L11" {
		t.Errorf("q150's items in order: want L10, L11, have %+v (%v)", items, err)
	}
}

// Every row count writes as the statements' sizes add up to it: counts around
// each power of two, and past the largest.
func TestInsertFlowsEveryBatchSize(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	create(t, s, spec("S", 1_000_000), time.Now())
	total := int64(0)
	for _, size := range []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 255, 257, 511, 512, 513, 1023, 1025} {
		var batch []flow.Event
		for i := range size {
			batch = append(batch, flowEvent(flow.Grab, fmt.Sprintf("s%d-%d", size, i), "S", 1))
		}
		if n, err := s.Flows.InsertFlows(ctx, batch); err != nil || n != size {
			t.Fatalf("%d events: want %d rows, have %d (%v)", size, size, n, err)
		}
		total += int64(size)
		if r := remaining(t, s, "S"); r != 1_000_000-total {
			t.Fatalf("after %d events: remaining %d, want %d", size, r, 1_000_000-total)
		}
	}
	if rows := scalar(t, s, "SELECT COUNT(*) FROM grab_flow"); rows != total {
		t.Errorf("rows: want %d, have %d", total, rows)
	}
}

// MySQL refusing a value (here a pin longer than its column) stays an error of the
// whole batch, nothing of it written: the flow sink then writes the events one by
// one and dead-letters the refused one.
func TestInsertFlowsRefusedValueIsAnErrorAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	create(t, s, spec("V", 100), time.Now())
	bad := flowEvent(flow.Grab, "v2", "V", 1)
	bad.Pin = strings.Repeat("p", 200)
	_, err := s.Flows.InsertFlows(ctx, []flow.Event{flowEvent(flow.Grab, "v1", "V", 1), bad})
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1406 {
		t.Fatalf("want MySQL error 1406 (data too long), have %v", err)
	}
	if rows := scalar(t, s, "SELECT COUNT(*) FROM grab_flow"); rows != 0 {
		t.Errorf("%d rows written by a refused batch", rows)
	}
	if r := remaining(t, s, "V"); r != 100 {
		t.Errorf("remaining moved by a refused batch: %d", r)
	}
	if n, err := s.Flows.InsertFlows(ctx, []flow.Event{flowEvent(flow.Grab, "v1", "V", 1)}); err != nil || n != 1 {
		t.Errorf("the good event alone: want 1 row, have %d (%v)", n, err)
	}
}

// An envelope pool's item lands with its amount and parts (a GRAB what it took, a
// CANCEL what it gave back) and GrabItems reads them back; any other item leaves
// both NULL.
func TestInsertFlowsKeepsAnEnvelopeItemsAmountAndParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t)
	grab := flowEvent(flow.Grab, "env-1", "E", 3)
	grab.Items[0].Amount, grab.Items[0].Parts = 355, []int{0, 1, 4}
	cancel := flowEvent(flow.Cancel, "env-1", "E", 3)
	cancel.Items[0].Amount, cancel.Items[0].Parts = 355, []int{0, 1, 4}
	if n, err := s.Flows.InsertFlows(ctx, []flow.Event{grab, cancel, flowEvent(flow.Grab, "plain-1", "P", 1)}); err != nil || n != 3 {
		t.Fatalf("insert: %d rows (%v); want 3", n, err)
	}
	for _, r := range []struct {
		rid, kind string
		amount    sql.NullInt64
		parts     sql.NullString
	}{
		{"env-1", "GRAB", sql.NullInt64{Int64: 355, Valid: true}, sql.NullString{String: "0,1,4", Valid: true}},
		{"env-1", "CANCEL", sql.NullInt64{Int64: 355, Valid: true}, sql.NullString{String: "0,1,4", Valid: true}},
		{"plain-1", "GRAB", sql.NullInt64{}, sql.NullString{}},
	} {
		var amount sql.NullInt64
		var parts sql.NullString
		if err := s.DB().QueryRow("SELECT amount, parts FROM grab_flow WHERE request_id = ? AND kind = ?", r.rid, r.kind).Scan(&amount, &parts); err != nil {
			t.Fatal(err)
		}
		if amount != r.amount || parts != r.parts {
			t.Errorf("%s %s: amount %+v parts %+v; want %+v %+v", r.kind, r.rid, amount, parts, r.amount, r.parts)
		}
	}
	_, _, items, err := s.Flows.GrabItems(ctx, "env-1")
	if err != nil || len(items) != 1 || items[0].Amount != 355 || !slices.Equal(items[0].Parts, []int{0, 1, 4}) {
		t.Errorf("GrabItems: %+v (%v); want the amount 355 and parts [0 1 4]", items, err)
	}
	if _, _, items, err := s.Flows.GrabItems(ctx, "plain-1"); err != nil || len(items) != 1 || items[0].Amount != 0 || items[0].Parts != nil {
		t.Errorf("GrabItems of an item of no pool: %+v (%v); want no amount nor parts", items, err)
	}
}
