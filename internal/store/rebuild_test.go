package store_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
)

// Migrations 0002 and 0003 may run again (a crash between an ALTER and its record):
// they must then change nothing and fail nothing.
func TestFlowMigrationsRunTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.DB().ExecContext(ctx, "DELETE FROM schema_migrations WHERE version IN (2, 3)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = store.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("reopen with 0002 and 0003 unrecorded: %v", err)
	}
	defer db.Close()
	var n int
	if err := db.DB().GetContext(ctx, &n, `SELECT COUNT(*) FROM information_schema.columns
 WHERE table_schema = DATABASE() AND table_name = 'grab_flow' AND column_name IN ('body_hash', 'reason', 'index_shard')`); err != nil || n != 3 {
		t.Fatalf("grab_flow has %d of the 3 columns (%v)", n, err)
	}
}

// ridOnIndexShard is a request id whose index entry lives on shard.
func ridOnIndexShard(t *testing.T, prefix string, shard int) string {
	for i := 0; ; i++ {
		rid := fmt.Sprintf("%s-%d", prefix, i)
		if ring.Default.Shard(promo.RequestIndexKey(rid)) == shard {
			return rid
		}
	}
}

// The rebuild of a shard restores the request index entries that lived on it from
// the GRAB rows: one entry per request with all its items, cancelled grants too
// (the index outlives a cancel), none of another shard and none older than since.
func TestEachIndexEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t)
	const shard = 5
	multi, single, old := ridOnIndexShard(t, "a-multi", shard), ridOnIndexShard(t, "b-single", shard), ridOnIndexShard(t, "c-old", shard)
	elsewhere := ridOnIndexShard(t, "d-elsewhere", shard+1)
	two := flowEvent(flow.Grab, multi, "p1", 2)
	two.Items = append(two.Items, flow.Item{PromoID: "p2", Type: 4, Num: 1, Shard: 9})
	aged := flowEvent(flow.Grab, old, "p1", 1)
	aged.OccurredAt = flow.Stamp(time.Now().Add(-48 * time.Hour))
	events := []flow.Event{two, flowEvent(flow.Grab, single, "p1", 1), flowEvent(flow.Cancel, single, "p1", 1), aged, flowEvent(flow.Grab, elsewhere, "p1", 1)}
	if _, err := s.Flows.InsertFlows(ctx, events); err != nil {
		t.Fatal(err)
	}
	var got []store.IndexEntry
	if err := s.Rebuild.EachIndexEntry(ctx, shard, time.Now().Add(-time.Hour), func(e store.IndexEntry) error {
		got = append(got, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []flow.Event{two, events[1]}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d (%s and %s): %+v", len(got), len(want), multi, single, got)
	}
	for i, w := range want {
		g := got[i]
		if g.RequestID != w.RequestID || g.BodyHash != w.BodyHash || g.Pin != w.Pin || g.IP != w.IP || !reflect.DeepEqual(g.Items, w.Items) {
			t.Errorf("entry %d: got %+v, want the GRAB %+v", i, g, w)
		}
		if age := time.Since(g.At); age < 0 || age > time.Minute {
			t.Errorf("entry %d: occurred %s ago", i, age)
		}
	}
}

// EachFlow reads every row of the promotion, GRAB and CANCEL, alike whether the
// driver sends a prepared statement (binary protocol) or interpolates its
// arguments (text protocol).
func TestEachFlowReadsBothDriverProtocols(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	s, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bucketed := flowEvent(flow.Grab, "ef-2", "ef", 1)
	bucketed.Items[0].Bucket, bucketed.Items[0].Buckets = 2, 4
	pooled := flowEvent(flow.Grab, "ef-3", "ef", 2)
	pooled.Items[0].Amount, pooled.Items[0].Parts = 1234, []int{7, 11}
	events := []flow.Event{flowEvent(flow.Grab, "ef-1", "ef", 3), bucketed, pooled,
		flowEvent(flow.Cancel, "ef-1", "ef", 3), flowEvent(flow.Grab, "ef-other", "not-ef", 1)}
	if _, err := s.Flows.InsertFlows(ctx, events); err != nil {
		t.Fatal(err)
	}
	want := []store.FlowRow{
		{RequestID: "ef-1", Pin: "pin-ef-1", IP: "10.0.0.1", Num: 3, BodyHash: "h-ef-1", Buckets: 1},
		{RequestID: "ef-2", Pin: "pin-ef-2", IP: "10.0.0.1", Num: 1, BodyHash: "h-ef-2", Bucket: 2, Buckets: 4},
		{RequestID: "ef-3", Pin: "pin-ef-3", IP: "10.0.0.1", Num: 2, BodyHash: "h-ef-3", Buckets: 1, Amount: 1234, Parts: []int{7, 11}},
		{Cancel: true, RequestID: "ef-1", Pin: "pin-ef-1", IP: "10.0.0.1", Num: 3, Reason: "USER_CANCELLED", Buckets: 1},
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	for _, d := range []string{dsn, dsn + sep + "interpolateParams=true"} {
		db, err := store.Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var got []store.FlowRow
		if err := db.Rebuild.EachFlow(ctx, store.ID{PromoID: "ef", Type: 1}, func(r store.FlowRow) error {
			got = append(got, r)
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		slices.SortFunc(got, func(a, b store.FlowRow) int {
			return strings.Compare(fmt.Sprint(a.Cancel, a.RequestID), fmt.Sprint(b.Cancel, b.RequestID))
		})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", d, got, want)
		}
	}
}

// makePool turns the promotion row of id into an envelope pool of parts (as
// promo-admin's create writes one: envelope_amount and the split).
func makePool(t *testing.T, s *store.Store, id string, parts []int64) {
	t.Helper()
	var sum int64
	for i, a := range parts {
		sum += a
		if _, err := s.DB().Exec(`INSERT INTO promotion_envelope (promo_id, promo_type, idx, amount) VALUES (?, 1, ?, ?)`, id, i, a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DB().Exec(`UPDATE promotion SET envelope_amount = ?, envelope_min = 1 WHERE promo_id = ? AND promo_type = 1`, sum, id); err != nil {
		t.Fatal(err)
	}
}

// poolEvent is a flow event of a pool item taking (giving back) parts.
func poolEvent(kind flow.Kind, rid, promoID string, amount int64, parts ...int) flow.Event {
	e := flowEvent(kind, rid, promoID, int64(len(parts)))
	e.Items[0].Amount, e.Items[0].Parts = amount, parts
	return e
}

// A pool's parts left, by the record: its split less the parts a GRAB row names
// whose request has no CANCEL row, whether that CANCEL names the parts or not (a
// CANCEL published after its ledger entry was gone names none); a part given back
// and taken again by another grab is held.
func TestEnvelopePoolHoldsWhatNoCancelGaveBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t)
	create(t, s, spec("pool", 6), time.Now())
	create(t, s, spec("plain", 6), time.Now())
	split := []int64{10, 20, 30, 40, 50, 60}
	makePool(t, s, "pool", split)
	noParts := flowEvent(flow.Cancel, "r3", "pool", 1)
	events := []flow.Event{
		poolEvent(flow.Grab, "r1", "pool", 30, 0, 1),
		poolEvent(flow.Grab, "r2", "pool", 30, 2),
		poolEvent(flow.Cancel, "r2", "pool", 30, 2),
		poolEvent(flow.Grab, "r3", "pool", 40, 3),
		noParts,
		poolEvent(flow.Grab, "r4", "pool", 30, 2), // part 2 again, after r2 gave it back
	}
	if _, err := s.Flows.InsertFlows(ctx, events); err != nil {
		t.Fatal(err)
	}
	pool, ok, err := s.Rebuild.EnvelopePool(ctx, store.ID{PromoID: "pool", Type: 1})
	if err != nil || !ok {
		t.Fatalf("pool: ok %v, %v", ok, err)
	}
	if pool.Amount != 210 || !slices.Equal(pool.Parts, split) {
		t.Errorf("pool: amount %d, split %v; want 210 and %v", pool.Amount, pool.Parts, split)
	}
	if want := []int{1, 1, 1, 0, 0, 0}; !slices.Equal(pool.Held, want) {
		t.Errorf("held %v, want %v", pool.Held, want)
	}
	if left := pool.Left(); !slices.Equal(left, []int{3, 4, 5}) || pool.LeftAmount() != 150 {
		t.Errorf("left %v worth %d; want [3 4 5] worth 150", left, pool.LeftAmount())
	}
	if odd := pool.Odd(); len(odd) != 0 {
		t.Errorf("a record that adds up reported odd: %v", odd)
	}

	// The same part held by two grabs, and one the split lacks, are reported.
	if _, err := s.Flows.InsertFlows(ctx, []flow.Event{poolEvent(flow.Grab, "r5", "pool", 70, 0, 9)}); err != nil {
		t.Fatal(err)
	}
	pool, _, err = s.Rebuild.EnvelopePool(ctx, store.ID{PromoID: "pool", Type: 1})
	if err != nil {
		t.Fatal(err)
	}
	if odd := pool.Odd(); len(odd) != 2 || !strings.Contains(odd[0], "part 0 is held by 2 grabs") || !strings.Contains(odd[1], "1 parts") {
		t.Errorf("odd %q; want part 0 held twice and one part not in the split", odd)
	}

	for _, id := range []store.ID{{PromoID: "plain", Type: 1}, {PromoID: "absent", Type: 1}} {
		if _, ok, err := s.Rebuild.EnvelopePool(ctx, id); ok || err != nil {
			t.Errorf("%s: ok %v, %v; want no pool", id, ok, err)
		}
	}
}
