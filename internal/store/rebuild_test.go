package store_test

import (
	"context"
	"fmt"
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
	if _, err := s.InsertFlows(ctx, events); err != nil {
		t.Fatal(err)
	}
	var got []store.IndexEntry
	if err := s.EachIndexEntry(ctx, shard, time.Now().Add(-time.Hour), func(e store.IndexEntry) error {
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
		if g.RequestID != w.RequestID || g.BodyHash != w.BodyHash || g.Pin != w.Pin || g.IP != w.IP || !slices.Equal(g.Items, w.Items) {
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
	events := []flow.Event{flowEvent(flow.Grab, "ef-1", "ef", 3), bucketed,
		flowEvent(flow.Cancel, "ef-1", "ef", 3), flowEvent(flow.Grab, "ef-other", "not-ef", 1)}
	if _, err := s.InsertFlows(ctx, events); err != nil {
		t.Fatal(err)
	}
	want := []store.FlowRow{
		{RequestID: "ef-1", Pin: "pin-ef-1", IP: "10.0.0.1", Num: 3, BodyHash: "h-ef-1", Buckets: 1},
		{RequestID: "ef-2", Pin: "pin-ef-2", IP: "10.0.0.1", Num: 1, BodyHash: "h-ef-2", Bucket: 2, Buckets: 4},
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
		if err := db.EachFlow(ctx, store.ID{PromoID: "ef", Type: 1}, func(r store.FlowRow) error {
			got = append(got, r)
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		slices.SortFunc(got, func(a, b store.FlowRow) int {
			return strings.Compare(fmt.Sprint(a.Cancel, a.RequestID), fmt.Sprint(b.Cancel, b.RequestID))
		})
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", d, got, want)
		}
	}
}
