package grab

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// hungRecord is a MySQL that accepts a query and never answers (a frozen server):
// only the caller's deadline ends the wait. asked counts the queries of either kind.
type hungRecord struct{ asked atomic.Int32 }

func (h *hungRecord) Granted(ctx context.Context, _, _ string, _ int) (bool, error) {
	h.asked.Add(1)
	<-ctx.Done()
	return false, ctx.Err()
}

func (h *hungRecord) GrabItems(ctx context.Context, _ string) (string, string, []flow.Item, error) {
	h.asked.Add(1)
	<-ctx.Done()
	return "", "", nil, ctx.Err()
}

// A hung record must not stall the reconciler: a back-query waited for its answer
// without a deadline, so one frozen MySQL stopped every pass, and with it every
// CANCEL owed on every shard. Each back-query is now bounded, and a pass asks no
// more once one has failed.
func TestReconcilerIsNotStalledByAHungRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, shards := privateShards(t)
	now := time.Now()
	id := idOnShard(2)
	key := promo.Key(id, 1)
	if code, err := lua.Create(ctx, c, 2, key, lua.AdminSpec{Ver: 1, Total: 10, MaxPerGrab: 1, RateWindowMs: 1000,
		StartMs: now.Add(-time.Hour).UnixMilli(), EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE"}); err != nil || code != lua.AdminOK {
		t.Fatalf("create: %v %v", code, err)
	}
	// Three takes left open by a crash, long past their deadline, and one aborted
	// grab whose CANCEL is owed.
	past := now.Add(-time.Minute)
	for _, rid := range []string{"p1", "p2", "p3", "a1"} {
		if r, err := lua.Grab(ctx, c, lua.GrabCall{NowMs: past.UnixMilli(), DeadlineMs: past.UnixMilli(), RequestID: rid, BodyHash: "h",
			Pin: "pin-" + rid, IP: "10.0.0.1", RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}); err != nil || r.Code != lua.CodeOK {
			t.Fatalf("take %s: %+v %v", rid, r, err)
		}
	}
	if r, err := lua.Return(ctx, c, lua.ReturnCall{RequestID: "a1", Pin: "pin-a1", Mode: lua.ReturnAbort, NowMs: now.UnixMilli(), Keys: []string{key}}); err != nil || r.Code != lua.ReturnReturned {
		t.Fatalf("abort a1: %+v %v", r, err)
	}

	cfg := Defaults()
	cfg.AnswerTimeout = 300 * time.Millisecond
	rec := &hungRecord{}
	pub := &grabtest.Publisher{}
	svc, err := New(cfg, Deps{Shards: shards, Publisher: pub, Record: rec, Switches: configcenter.NewHolder(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	rc := NewReconciler(svc)

	done := make(chan ReconcileStats, 1)
	go func() {
		st, _ := rc.Reconcile(ctx) // no deadline of its own, as RunReconciler calls it
		done <- st
	}()
	select {
	case st := <-done:
		if st.Published != 1 || len(pub.Events()) != 1 {
			t.Fatalf("the owed CANCEL was not paid: %+v, %d events", st, len(pub.Events()))
		}
		if st.Aborted != 0 || st.Committed != 0 {
			t.Fatalf("a take was settled without the record's answer: %+v", st)
		}
		if n := rec.asked.Load(); n != 1 {
			t.Fatalf("the pass asked the hung record %d times, want 1", n)
		}
	case <-time.After(30 * time.Second): // far beyond the pass's own bound on the record
		t.Fatal("the reconciler pass is stalled by a hung record")
	}
	for _, rid := range []string{"p1", "p2", "p3"} {
		if e, _, _ := lua.ReadLedger(ctx, c, key, rid); e.State != lua.LedgerPending {
			t.Fatalf("%s: %s, want still pending until the record answers", rid, e.State)
		}
	}
}
