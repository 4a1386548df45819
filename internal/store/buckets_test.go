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
