package store_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
)

// The fence and the reconciler list every bucket of a bucketed promotion (each is a
// hash a shard may lose, each holds pending takes); the ENDED list keeps to the
// promotion key, the one bucket that announces; a pending change says how many
// buckets it reaches.
func TestPromotionKeysListEveryBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t)
	at := time.Now().Add(-2 * time.Hour)
	hot := spec("HOT", 40)
	hot.Buckets = 4
	hot.StartAt, hot.EndAt = at, at.Add(time.Hour) // ended an hour ago
	create(t, s, hot, at)
	plain := spec("PLAIN", 10)
	plain.StartAt, plain.EndAt = at, at.Add(time.Hour)
	create(t, s, plain, at)
	pending := spec("NEW", 30)
	pending.Buckets = 3
	if err := s.Promotions.Insert(ctx, store.NewPromotion(pending, promo.Active, at)); err != nil {
		t.Fatal(err)
	}

	hotKeys := bucket.Keys(ring.Default, promo.Key("HOT", 1), 4)
	newKeys := bucket.Keys(ring.Default, promo.Key("NEW", 1), 3)
	want := slices.Concat(hotKeys, newKeys, []string{promo.Key("PLAIN", 1)})
	slices.Sort(want)
	all, err := s.Keys.PromotionKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	if !slices.Equal(all, want) {
		t.Errorf("PromotionKeys: %v, want %v", all, want)
	}
	recent, err := s.Keys.PromotionKeysEndingAfter(ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(recent)
	if !slices.Equal(recent, want) {
		t.Errorf("PromotionKeysEndingAfter: %v, want %v", recent, want)
	}
	ended, err := s.Keys.PromotionKeysEndedBetween(ctx, at, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ended)
	if want := []string{promo.Key("HOT", 1), promo.Key("PLAIN", 1)}; !slices.Equal(ended, want) {
		t.Errorf("PromotionKeysEndedBetween: %v, want %v", ended, want)
	}

	changes, err := s.Rebuild.PendingChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].ID != (store.ID{PromoID: "NEW", Type: 1}) || changes[0].Buckets != 3 {
		t.Errorf("PendingChanges: %+v, want NEW/1 of 3 buckets", changes)
	}
}

// FlowCounters nets a bucketed promotion's flow log by the bucket the units came
// from and went back to; an ordinary promotion's is all bucket 0's.
func TestFlowCountersByBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t)
	inBucket := func(kind flow.Kind, rid string, num int64, b int) flow.Event {
		e := flowEvent(kind, rid, "fc", num)
		e.Items[0].Bucket, e.Items[0].Buckets = b, 4
		return e
	}
	events := []flow.Event{
		inBucket(flow.Grab, "fc-1", 3, 0), inBucket(flow.Grab, "fc-2", 2, 2), inBucket(flow.Grab, "fc-3", 1, 2),
		inBucket(flow.Cancel, "fc-2", 2, 2), inBucket(flow.Grab, "fc-4", 4, 3),
		flowEvent(flow.Grab, "plain-1", "fc-plain", 2), flowEvent(flow.Grab, "plain-2", "fc-plain", 1), flowEvent(flow.Cancel, "plain-1", "fc-plain", 2),
	}
	if _, err := s.Flows.InsertFlows(ctx, events); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		promoID           string
		granted, returned int64
		byBucket          map[int]int64
	}{
		{"fc", 10, 2, map[int]int64{0: 3, 2: 1, 3: 4}},
		{"fc-plain", 3, 2, map[int]int64{0: 1}},
	} {
		fc, err := s.Rebuild.FlowCounters(ctx, store.ID{PromoID: c.promoID, Type: 1})
		if err != nil {
			t.Fatal(err)
		}
		for b, n := range fc.ByBucket {
			if n == 0 {
				delete(fc.ByBucket, b)
			}
		}
		if fc.Granted != c.granted || fc.Returned != c.returned || !maps.Equal(fc.ByBucket, c.byBucket) {
			t.Errorf("%s: granted %d returned %d by bucket %v; want %d, %d, %v", c.promoID, fc.Granted, fc.Returned, fc.ByBucket, c.granted, c.returned, c.byBucket)
		}
	}
}

// A grab that counted its ip nowhere (noIp) keeps the flag through the record: the
// ips' sums leave it and its CANCEL out, the pins' keep them, and the items read
// back for a cancel or the request index say noIp as the producer did.
func TestFlowsKeepNoIP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t)
	item := func(kind flow.Kind, rid string, num int64, noIP bool) flow.Event {
		e := flowEvent(kind, rid, "nip", num)
		e.Items[0].Bucket, e.Items[0].Buckets, e.Items[0].NoIP = 1, 4, noIP
		return e
	}
	events := []flow.Event{item(flow.Grab, "nip-1", 3, true), item(flow.Grab, "nip-2", 2, false),
		item(flow.Grab, "nip-3", 1, true), item(flow.Cancel, "nip-3", 1, true)}
	if _, err := s.Flows.InsertFlows(ctx, events); err != nil {
		t.Fatal(err)
	}
	fc, err := s.Rebuild.FlowCounters(ctx, store.ID{PromoID: "nip", Type: 1})
	if err != nil {
		t.Fatal(err)
	}
	if fc.IPs["10.0.0.1"] != 2 || fc.Pins["pin-nip-1"] != 3 || fc.Pins["pin-nip-2"] != 2 || fc.Net() != 5 {
		t.Errorf("counters %+v: want the ip at 2 (nip-2 alone), pins nip-1 3 and nip-2 2, net 5", fc)
	}
	for rid, want := range map[string]bool{"nip-1": true, "nip-2": false} {
		_, _, items, err := s.Flows.GrabItems(ctx, rid)
		if err != nil || len(items) != 1 || items[0].NoIP != want || items[0].Buckets != 4 {
			t.Errorf("GrabItems(%s): %+v %v; want one item of 4 buckets, noIp %v", rid, items, err, want)
		}
	}
}
