package grab

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

// A reconciler pass visits the pending sets of the promotions the record lists,
// without a SCAN (a sweep's cost grows with every key of the shard), and sweeps
// only at start, every ReconcileSweepEvery, and while the record has never
// answered; a sweep still finds a pending set the record does not list.
func TestReconcilerVisitsTheListedPromotionsAndSweepsRarely(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, shards := privateShards(t)
	listed, unlisted := promo.Key(idOnShard(4), 1), promo.Key(idOnShard(6), 1)
	now := time.Now()
	var recordDown atomic.Bool
	recordDown.Store(true)
	keys := func(context.Context) ([]string, error) {
		if recordDown.Load() {
			return nil, context.DeadlineExceeded
		}
		return []string{listed}, nil
	}
	clock := newFakeClock(now) // read by the cache sweeper's goroutine too
	cfg := Defaults()
	cfg.ReconcileSweepEvery = time.Minute
	svc, err := New(cfg, Deps{Shards: shards, Publisher: &grabtest.Publisher{}, Switches: configcenter.NewHolder(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock: clock.now, PromotionKeys: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	rc := NewReconciler(svc)
	for i, key := range []string{listed, unlisted} {
		if code, err := lua.Create(ctx, c, 4+2*i, key, lua.AdminSpec{Ver: 1, Total: 100, MaxPerGrab: 1, RateWindowMs: 1000,
			StartMs: now.Add(-time.Hour).UnixMilli(), EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE"}); err != nil || code != lua.AdminOK {
			t.Fatalf("create %s: %v %v", key, code, err)
		}
	}
	n := 0
	owe := func(key string) { // an aborted take whose CANCEL is owed: due at once
		t.Helper()
		n++
		rid := "owed-" + strconv.Itoa(n)
		if r, err := lua.Grab(ctx, c, lua.GrabCall{NowMs: now.UnixMilli(), DeadlineMs: now.UnixMilli(), RequestID: rid, BodyHash: "h",
			Pin: "p" + rid, IP: "10.0.0.1", RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}); err != nil || r.Code != lua.CodeOK {
			t.Fatalf("take %s: %+v %v", rid, r, err)
		}
		if r, err := lua.Return(ctx, c, lua.ReturnCall{RequestID: rid, Pin: "p" + rid, Mode: lua.ReturnAbort, NowMs: now.UnixMilli(), Keys: []string{key}}); err != nil || r.Code != lua.ReturnReturned {
			t.Fatalf("abort %s: %+v %v", rid, r, err)
		}
	}
	pass := func(wantPublished int, wantScan bool, why string) {
		t.Helper()
		before := testenv.CommandCalls(t, c)["scan"]
		st, err := rc.Reconcile(ctx)
		if err != nil {
			t.Fatalf("%s: %v", why, err)
		}
		scanned := testenv.CommandCalls(t, c)["scan"] != before
		if st.Published != wantPublished || scanned != wantScan {
			t.Fatalf("%s: published %d (want %d), scanned %v (want %v)", why, st.Published, wantPublished, scanned, wantScan)
		}
	}

	owe(listed)
	owe(unlisted)
	pass(2, true, "the first pass sweeps")
	owe(listed)
	owe(unlisted)
	pass(2, true, "a pass while the record has never answered sweeps")
	recordDown.Store(false)
	owe(listed)
	owe(unlisted)
	pass(1, false, "a pass with the record's list visits the listed promotion alone")
	recordDown.Store(true)
	owe(listed)
	pass(1, false, "a pass while the record does not answer visits its last list")
	clock.add(time.Minute)
	pass(1, true, "the sweep after ReconcileSweepEvery finds the unlisted promotion's debt")
}
