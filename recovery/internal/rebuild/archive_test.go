package rebuild_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/recovery/internal/rebuild"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
)

// A shard that held a live promotion and one whose sale ended long ago is lost
// after the archive moved the old one's rows out of grab_flow: the rebuild
// restores the live promotion exactly, and does not bring the archived one back
// from a record that no longer holds its flows.
func TestRebuildAfterTheArchive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, "sink-archive", nil)
	suffix := testenv.Suffix()
	live := rt.Create(t, w.db.Promotions, w.shards, rt.Spec{PromoID: rt.IDOnShard("live-"+suffix, lostShard), Total: 200, PerPin: 4})
	old := rt.Create(t, w.db.Promotions, w.shards, rt.Spec{PromoID: rt.IDOnShard("old-"+suffix, lostShard), Total: 200, PerPin: 4})
	s := rt.NewSale(w.shards, w.brokers)
	defer s.Close()
	held, _ := sale(t, s, []string{live, old}, "arch-"+suffix, 4, 40)
	if len(held) == 0 {
		t.Fatal("the sale granted nothing")
	}
	if err := w.deps.Lag.WaitCaughtUp(ctx, 30*time.Second, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The old sale ended 40 days ago (its row says so), and the archive runs.
	oldID, typ, _ := promo.ParseKey(old)
	if _, err := w.db.DB().ExecContext(ctx, `UPDATE promotion SET end_at = ? WHERE promo_id = ? AND promo_type = ?`,
		time.Now().Add(-40*24*time.Hour).UTC(), oldID, typ); err != nil {
		t.Fatal(err)
	}
	if n, err := w.db.Archive.MarkEnded(ctx, time.Now().Add(-30*24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("mark: %d %v", n, err)
	}
	for {
		n, err := w.db.Archive.MoveFlows(ctx, store.ID{PromoID: oldID, Type: typ}, 7)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	before := rt.Take(t, w.shards[lostShard], live)

	w.own.Kill()
	w.own.Start()
	sum, err := rebuild.Run(ctx, w.deps, options(lostShard))
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if len(sum.Shards) != 1 || sum.Shards[0].Promotions != 1 {
		t.Fatalf("summary %+v; want the one live promotion rebuilt", sum.Shards)
	}
	if after := rt.Take(t, w.shards[lostShard], live); !reflect.DeepEqual(before, after) {
		t.Errorf("%s rebuilt differs:\nbefore %+v\nafter  %+v", live, before, after)
	}
	if n := w.shards[lostShard].Exists(ctx, old).Val(); n != 0 {
		t.Errorf("the archived promotion %s came back", old)
	}
}
