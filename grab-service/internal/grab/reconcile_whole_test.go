package grab

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/lua"
)

// switchRecord holds a request's GRAB once stored is set, as MySQL does once the
// flow sink has written it; an item of cancelled has a CANCEL stored beside it.
type switchRecord struct {
	stored    atomic.Bool
	cancelled string // promoId
	pin       string
	items     []flow.Item
}

func (r *switchRecord) Granted(_ context.Context, _, promoID string, _ int) (bool, error) {
	return r.stored.Load() && promoID != r.cancelled, nil
}

func (r *switchRecord) GrabItems(context.Context, string) (string, string, []flow.Item, error) {
	return r.pin, "10.0.0.1", r.items, nil
}

// openGrab writes what a killed grab-service leaves of request rid, for pin: a
// promotion of 10 units on each of shards, the request index entry, and the take
// of each item not in missing, due at deadline(item). It returns the promotion keys
// and the items, in the request's order.
func openGrab(t *testing.T, c *redis.Client, rid, pin string, shards, missing []int, deadline func(item int) time.Time) ([]string, []flow.Item) {
	t.Helper()
	keys := createOnShards(t, c, "", shards, 10)
	return keys, openTakes(t, c, rid, pin, keys, missing, deadline)
}

// createOnShards creates a promotion of total units on each of shards (ids
// prefixed by prefix) and returns their keys.
func createOnShards(t *testing.T, c *redis.Client, prefix string, shards []int, total int64) []string {
	t.Helper()
	now := time.Now()
	var keys []string
	for _, shard := range shards {
		key := promo.Key(prefix+idOnShard(shard), 1)
		if code, err := lua.Create(context.Background(), c, 0, key, lua.AdminSpec{Ver: 1, Total: total, MaxPerGrab: 1, RateWindowMs: 1000,
			StartMs: now.Add(-time.Hour).UnixMilli(), EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE"}); err != nil || code != lua.AdminOK {
			t.Fatalf("create %s: %v %v", key, code, err)
		}
		keys = append(keys, key)
	}
	return keys
}

// openTakes writes request rid's index entry for one unit of each promotion of
// keys, and the take of each item not in missing, due at deadline(item). It
// returns the items, in the request's order.
func openTakes(t *testing.T, c *redis.Client, rid, pin string, keys []string, missing []int, deadline func(item int) time.Time) []flow.Item {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	var items []flow.Item
	for _, key := range keys {
		id, typ, _ := promo.ParseKey(key)
		items = append(items, flow.Item{PromoID: id, Type: typ, Num: 1, Shard: ring.Default.Shard(key)})
	}
	index := flow.RequestIndex{BodyHash: "h", Pin: pin, IP: "10.0.0.1", Items: items}
	if err := c.Set(ctx, promo.RequestIndexKey(rid), index.AppendJSON(nil), 24*time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	for i, key := range keys {
		if slices.Contains(missing, i) {
			continue
		}
		if r, err := lua.Grab(ctx, c, lua.GrabCall{NowMs: now.UnixMilli(), DeadlineMs: deadline(i).UnixMilli(), RequestID: rid, BodyHash: "h",
			Pin: pin, IP: "10.0.0.1", RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}); err != nil || r.Code != lua.CodeOK {
			t.Fatalf("take %s: %+v %v", key, r, err)
		}
	}
	return items
}

// reconciler is a Reconciler, and its Service, over shards for the reconciler tests.
func reconciler(t *testing.T, shards []redis.UniversalClient, rec Record, clock func() time.Time, fault func(string) error) *Reconciler {
	t.Helper()
	svc, err := New(Defaults(), Deps{Shards: shards, Publisher: &grabtest.Publisher{}, Switches: configcenter.NewHolder(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock: clock, Record: rec, Fault: fault})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return NewReconciler(svc)
}

// mustCommit and mustAbort settle a take as the killed process (or a live abort)
// had.
func mustCommit(t *testing.T, c *redis.Client, rid, key string) {
	t.Helper()
	if code, err := lua.Commit(context.Background(), c, rid, []string{key}); err != nil || code != lua.CommitCommitted {
		t.Fatalf("commit %s: %v %v", key, code, err)
	}
}

func mustAbort(t *testing.T, c *redis.Client, rid, pin, key string) {
	t.Helper()
	if r, err := lua.Return(context.Background(), c, lua.ReturnCall{RequestID: rid, Pin: pin, Mode: lua.ReturnAbort, NowMs: time.Now().UnixMilli(),
		Keys: []string{key}}); err != nil || r.Code != lua.ReturnReturned {
		t.Fatalf("abort %s: %+v %v", key, r, err)
	}
}

// A grab of items on several shards left open by a killed grab-service is settled
// as a whole. Found by the crash drill (grab-service and the flow sink killed
// together): the take on one shard came due while the GRAB was still on its way to
// MySQL and was aborted; the take on the other was reconciled once the GRAB had
// landed and was committed, so the buyer, told the grab was rolled back, held one
// item. Every take now follows its request's anchor (its first take by shard and
// key), which the first take to come due settles: by the takes (one committed means
// the GRAB was acknowledged; one given back or never taken means it was rolled
// back), else by the record.
func TestReconcilerSettlesAGrabAsAWhole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		shards        []int // the items' shards, in the request's order
		dueFirst      []int // the takes (by item) due in the first pass; the rest in the second
		committed     []int // takes the killed process had committed
		aborted       []int // takes a live abort had given back before it failed
		missing       []int // takes it never made
		storedAtFirst bool  // the record holds the GRAB during the first pass (always in the second)
		cancelledItem int   // an item whose CANCEL the record holds (-1: none)
		granted       bool  // every take ends granted; else every one returned
		deleted       []int // items whose promotion a merchandiser deleted before the passes
	}{
		{"first aborted, then the GRAB lands", []int{4, 9}, []int{0}, nil, nil, nil, false, -1, false, nil},
		{"GRAB stored before either", []int{4, 9}, []int{0}, nil, nil, nil, true, -1, true, nil},
		{"second committed, GRAB not stored yet", []int{4, 9}, []int{0}, []int{1}, nil, nil, false, -1, true, nil},
		{"the anchor settled by a later take's turn", []int{4, 9}, []int{1}, nil, nil, nil, false, -1, false, nil},
		{"three shards, the anchor due first", []int{9, 0, 4}, []int{1}, nil, nil, nil, false, -1, false, nil},
		{"three shards, the GRAB stored", []int{9, 0, 4}, []int{2}, nil, nil, nil, true, -1, true, nil},
		{"a take never made (killed between two takes)", []int{4, 9}, []int{0}, nil, nil, []int{1}, false, -1, false, nil},
		{"a committed take beside an aborted anchor", []int{4, 9, 12}, []int{2}, []int{1}, []int{0}, nil, true, -1, false, nil},
		{"the record holds a CANCEL of the other item", []int{4, 9}, []int{0}, nil, nil, nil, true, 1, false, nil},
		// A deleted promotion's ledger stays a day (delete.lua): its takes, open or
		// settled, still decide for the others of their requests.
		{"the anchor's promotion deleted, the GRAB stored", []int{4, 9}, []int{1}, nil, nil, nil, true, -1, true, []int{0}},
		{"the anchor's promotion deleted, no GRAB", []int{4, 9}, []int{1}, nil, nil, nil, false, -1, false, []int{0}},
		{"the other's promotion deleted, the GRAB stored", []int{4, 9}, []int{1}, nil, nil, nil, true, -1, true, []int{1}},
		{"the committed anchor's promotion deleted", []int{4, 9}, []int{1}, []int{0}, nil, nil, false, -1, true, []int{0}},
		{"a committed take's promotion deleted, the anchor pending", []int{4, 9}, []int{0}, []int{1}, nil, nil, false, -1, true, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c, shards := privateShards(t)
			now := time.Now()
			rid := "whole-1"
			rec := &switchRecord{pin: "p1"}
			if tc.cancelledItem >= 0 {
				rec.cancelled = idOnShard(tc.shards[tc.cancelledItem])
			}
			// The killed instance's claim and takes: those of dueFirst due in the first
			// pass, the others two hours later (a pass settles shards one after another).
			keys, items := openGrab(t, c, rid, rec.pin, tc.shards, tc.missing, func(i int) time.Time {
				if slices.Contains(tc.dueFirst, i) {
					return now.Add(-time.Hour)
				}
				return now.Add(time.Hour)
			})
			rec.items = items
			for _, i := range tc.committed {
				mustCommit(t, c, rid, keys[i])
			}
			for _, i := range tc.aborted {
				mustAbort(t, c, rid, rec.pin, keys[i])
			}
			for _, i := range tc.deleted {
				if r, err := lua.Delete(ctx, c, tc.shards[i], keys[i], 2, time.Now().UnixMilli()); err != nil || r.Code != lua.AdminOK {
					t.Fatalf("delete %s: %v %v", keys[i], r, err)
				}
			}
			clock := newFakeClock(now) // read by the cache sweeper's goroutine too
			svc := reconciler(t, shards, rec, clock.now, nil)

			rec.stored.Store(tc.storedAtFirst)
			if _, err := svc.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			rec.stored.Store(true)
			clock.set(now.Add(2 * time.Hour))
			if _, err := svc.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			for i, key := range keys {
				if slices.Contains(tc.missing, i) {
					continue
				}
				e, found, err := lua.ReadLedger(ctx, c, key, rid)
				if err != nil || !found {
					t.Fatalf("%s: ledger entry %v %v", key, found, err)
				}
				returned := slices.Contains([]string{lua.LedgerAborted, lua.LedgerAbortRecorded, lua.LedgerCancelled, lua.LedgerReturned}, e.State)
				if tc.granted != (e.State == lua.LedgerCommitted) || !tc.granted && !returned {
					t.Errorf("%s (shard %d): ledger state %s, want every take %s", key, tc.shards[i], e.State,
						map[bool]string{true: "granted (G)", false: "returned (A, X, C or R)"}[tc.granted])
				}
				if slices.Contains(tc.deleted, i) {
					if c.Exists(ctx, key).Val() != 0 {
						t.Errorf("%s: settling a take of a deleted promotion brought its hash back", key)
					}
					continue
				}
				remaining, err := c.HGet(ctx, key, "remaining").Int64()
				if wantLeft := map[bool]int64{false: 10, true: 9}[tc.granted]; err != nil || remaining != wantLeft {
					t.Errorf("%s: remaining %d (%v), want %d", key, remaining, err, wantLeft)
				}
			}
		})
	}
}

// A buyer's cancel that lands between the reconciler's reading of a granted anchor
// and its commit of the take it settles (the cancel returns the anchor and refuses
// the still pending take) must not leave that take granted beside the cancelled
// anchor: the reconciler reads the anchor again after committing and follows it.
func TestReconcilerFollowsACancelOfTheAnchor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, shards := privateShards(t)
	now := time.Now()
	rid, pin := "follow-1", "p1"
	keys, items := openGrab(t, c, rid, pin, []int{4, 9}, nil, func(int) time.Time { return now.Add(-time.Hour) })
	anchor, own := keys[0], keys[1]
	mustCommit(t, c, rid, anchor) // the killed process committed the anchor (shard 4) before it died
	buyerCancel := func(point string) error {
		if point == "reconcile-commit" {
			if r, err := lua.Return(ctx, c, lua.ReturnCall{RequestID: rid, Pin: pin, Mode: lua.ReturnCancel, Reason: "USER_CANCELLED",
				NowMs: now.UnixMilli(), Keys: []string{anchor}}); err != nil || r.Code != lua.ReturnReturned {
				t.Errorf("the buyer's cancel of the anchor: %+v %v", r, err)
			}
		}
		return nil
	}
	svc := reconciler(t, shards, &switchRecord{pin: pin, items: items}, nil, buyerCancel)
	if _, err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{anchor, own} {
		e, _, err := lua.ReadLedger(ctx, c, key, rid)
		remaining, herr := c.HGet(ctx, key, "remaining").Int64()
		if err != nil || herr != nil || (e.State != lua.LedgerCancelled && e.State != lua.LedgerReturned) || remaining != 10 {
			t.Errorf("%s: state %s, remaining %d (%v %v); want cancelled, all 10 back", key, e.State, remaining, err, herr)
		}
	}
}

// A buyer's cancel of a grab granted on one shard and still pending on another (a
// crash between two commits) returns the granted part and answers "retry", not
// 404 as it did after changing the first shard; the reconciler then settles the
// pending part as the rollback of the whole grab, and a retried cancel finds no
// granted grab (404): the buyer holds nothing.
func TestCancelOfAPartlyCommittedGrabAsksForARetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, shards := privateShards(t)
	now := time.Now()
	rid, pin := "partly-1", "p1"
	keys, items := openGrab(t, c, rid, pin, []int{4, 9}, nil, func(int) time.Time { return now.Add(-time.Hour) })
	committed, pending := keys[0], keys[1]
	mustCommit(t, c, rid, committed)
	rec := &switchRecord{pin: pin, items: items}
	rec.stored.Store(true)
	svc := reconciler(t, shards, rec, nil, nil)

	res, err := svc.cancel.Cancel(ctx, rid, pin, "USER_CANCELLED")
	if err != nil || res.Result != Unavailable {
		t.Fatalf("cancel of a partly committed grab: %+v %v, want UNAVAILABLE (retry)", res, err)
	}
	if _, err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{committed, pending} {
		if remaining, err := c.HGet(ctx, key, "remaining").Int64(); err != nil || remaining != 10 {
			t.Errorf("%s: remaining %d (%v), want all 10 back", key, remaining, err)
		}
	}
	// The grab ended rolled back as a whole: nothing granted is held.
	if res, err := svc.cancel.Cancel(ctx, rid, pin, "USER_CANCELLED"); !errors.Is(err, ErrGrabNotFound) {
		t.Fatalf("the retried cancel: %+v %v, want the 404 of a grab not granted", res, err)
	}
}

// flakyRecord is rec while down is unset; a back-query fails while it is set.
type flakyRecord struct {
	Record
	down atomic.Bool
}

func (r *flakyRecord) Granted(ctx context.Context, rid, promoID string, typ int) (bool, error) {
	if r.down.Load() {
		return false, errors.New("mysql: connection refused")
	}
	return r.Record.Granted(ctx, rid, promoID, typ)
}

// A take the reconciler cannot settle stays open (consistency first: only its
// anchor and the record can say how the grab ended), and how long the oldest has
// waited is reported, which is what on-call is paged on (alert
// ReconcileTakesBlocked): while the anchor's shard does not answer, while the
// record does not, and across passes that do not visit its pending set (a deleted
// promotion's is visited only when a pass sweeps). Once both answer, a pass
// settles the grab and the figure returns to 0.
func TestReconcilerReportsTakesItCannotSettle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, shards := privateShards(t)
	now := time.Now()
	rid, pin := "blocked-1", "p1"
	deadline := now.Add(-time.Hour)
	keys, items := openGrab(t, c, rid, pin, []int{4, 9}, nil, func(int) time.Time { return deadline })
	stored := &switchRecord{pin: pin, items: items}
	stored.stored.Store(true)
	rec := &flakyRecord{Record: stored}
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = down.Close() })
	withDown := slices.Clone(shards)
	withDown[4] = down // the anchor's shard
	svc := reconciler(t, withDown, rec, func() time.Time { return now }, nil)
	var listed []string // what the record lists: nothing, as for a deleted promotion
	svc.PromotionKeys = func(context.Context) ([]string, error) { return listed, nil }
	wantOverdue := now.Sub(deadline.Add(Defaults().ReconcileMargin)).Seconds()
	pass := func(name string, wantBlocked int, wantOverdue float64) {
		t.Helper()
		st, err := svc.Reconcile(ctx)
		if overdue := testutil.ToFloat64(svc.Metrics.overdue); st.Blocked != wantBlocked || overdue < wantOverdue-1 || overdue > wantOverdue+1 {
			t.Errorf("%s: blocked %d, overdue %.0fs (pass error %v); want %d, about %.0fs", name, st.Blocked, overdue, err, wantBlocked, wantOverdue)
		}
	}

	pass("the anchor's shard down", 1, wantOverdue)
	withDown[4] = c
	rec.down.Store(true)
	pass("the record down", 2, wantOverdue) // both takes now due and read
	pass("a pass that visits no pending set", 0, wantOverdue)
	if e, _, err := lua.ReadLedger(ctx, c, keys[1], rid); err != nil || e.State != lua.LedgerPending {
		t.Errorf("the take on shard 9: %+v %v; want it left pending", e, err)
	}
	rec.down.Store(false)
	listed = keys
	pass("both answer", 0, 0)
	for _, key := range keys {
		if e, _, err := lua.ReadLedger(ctx, c, key, rid); err != nil || e.State != lua.LedgerCommitted {
			t.Errorf("%s: %+v %v; want granted", key, e, err)
		}
	}
}
