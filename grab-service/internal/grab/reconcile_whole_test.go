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
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// switchRecord holds a request's GRAB once stored is set, as MySQL does once the
// flow sink has written it.
type switchRecord struct {
	stored atomic.Bool
	pin    string
	items  []flow.Item
}

func (r *switchRecord) Granted(context.Context, string, string, int) (bool, error) {
	return r.stored.Load(), nil
}

func (r *switchRecord) GrabItems(context.Context, string) (string, string, []flow.Item, error) {
	return r.pin, "10.0.0.1", r.items, nil
}

// A grab of two items on two shards left open by a killed grab-service is settled
// as a whole. Found by the crash drill (grab-service and the flow sink killed
// together): the take on one shard came due while the GRAB was still on its way to
// MySQL and was aborted; the take on the other was reconciled once the GRAB had
// landed and was committed, so the buyer, told the grab was rolled back, held one
// item. Likewise a take must not be aborted beside one the killed process had
// committed (its GRAB was acknowledged), however far behind the record is.
func TestReconcilerSettlesAGrabAsAWhole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		storedAtFirst bool // the record holds the GRAB when the first take comes due
		secondDone    bool // the killed process committed the second take
		want          string
	}{
		{"first aborted, then the GRAB lands", false, false, lua.LedgerAborted},
		{"GRAB stored before either", true, false, lua.LedgerCommitted},
		{"second committed, GRAB not stored yet", false, true, lua.LedgerCommitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c, shards := privateShards(t)
			now := time.Now()
			first, second := promo.Key(idOnShard(4), 1), promo.Key(idOnShard(9), 1)
			rid := "whole-1"
			rec := &switchRecord{pin: "p1"}
			for _, key := range []string{first, second} {
				if code, err := lua.Create(ctx, c, 0, key, lua.AdminSpec{Ver: 1, Total: 10, MaxPerGrab: 1, RateWindowMs: 1000,
					StartMs: now.Add(-time.Hour).UnixMilli(), EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE"}); err != nil || code != lua.AdminOK {
					t.Fatalf("create %s: %v %v", key, code, err)
				}
				id, typ, _ := promo.ParseKey(key)
				rec.items = append(rec.items, flow.Item{PromoID: id, Type: typ, Num: 1})
			}
			clock := now
			svc, err := New(Defaults(), Deps{Shards: shards, Publisher: &countingPublisher{}, Switches: configcenter.NewHolder(),
				Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Clock: func() time.Time { return clock }, Record: rec})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			// The killed instance's takes: the first shard's due now, the second's a
			// minute later (a pass settles shards one after another).
			for i, key := range []string{first, second} {
				deadline := now.Add(-time.Hour).Add(time.Duration(i) * 2 * time.Hour)
				if r, err := lua.Grab(ctx, c, lua.GrabCall{NowMs: now.UnixMilli(), DeadlineMs: deadline.UnixMilli(), RequestID: rid, BodyHash: "h",
					Pin: rec.pin, IP: "10.0.0.1", RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}); err != nil || r.Code != lua.CodeOK {
					t.Fatalf("take %s: %+v %v", key, r, err)
				}
			}
			index := flow.RequestIndex{BodyHash: "h", Pin: rec.pin, IP: "10.0.0.1", Items: rec.items}
			if err := c.Set(ctx, promo.RequestIndexKey(rid), index.AppendJSON(nil), time.Hour).Err(); err != nil {
				t.Fatal(err)
			}

			if tc.secondDone {
				if code, err := lua.Commit(ctx, c, rid, []string{second}); err != nil || code != lua.CommitCommitted {
					t.Fatalf("commit the second take: %v %v", code, err)
				}
			}
			rec.stored.Store(tc.storedAtFirst)
			if _, err := svc.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			rec.stored.Store(true)
			clock = now.Add(2 * time.Hour)
			if _, err := svc.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{first, second} {
				e, found, err := lua.ReadLedger(ctx, c, key, rid)
				if err != nil || !found {
					t.Fatalf("%s: ledger entry %v %v", key, found, err)
				}
				if settled := map[string]string{lua.LedgerAbortRecorded: lua.LedgerAborted}[e.State]; settled != "" {
					e.State = settled // its CANCEL published: aborted all the same
				}
				if e.State != tc.want {
					t.Errorf("%s: ledger state %s, want %s for both takes", key, e.State, tc.want)
				}
				remaining, err := c.HGet(ctx, key, "remaining").Int64()
				if wantLeft := map[string]int64{lua.LedgerAborted: 10, lua.LedgerCommitted: 9}[tc.want]; err != nil || remaining != wantLeft {
					t.Errorf("%s: remaining %d (%v), want %d", key, remaining, err, wantLeft)
				}
			}
		})
	}
}
