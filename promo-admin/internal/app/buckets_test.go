package app_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// bucketSpec is a create body for id in k buckets of total units.
func bucketSpec(e *admintest.Env, id string, k int, total int64) map[string]any {
	s := e.Spec(id)
	s["buckets"], s["total"] = k, total
	return s
}

// wantBuckets fails the test unless the answer shows k buckets on their layout's
// shards with these remaining stocks, and their sums.
func wantBuckets(t *testing.T, e *admintest.Env, r admintest.Response, id string, k int, total int64, remaining ...int64) {
	t.Helper()
	p := r.Promotion()
	var sum int64
	for _, n := range remaining {
		sum += n
	}
	l := e.Layout(id, 1, k)
	if p.Buckets != k || !slices.Equal(p.BucketShards, l.Shards) || !slices.Equal(p.BucketRemaining, remaining) ||
		p.Total != total || p.Remaining != sum || p.Granted != total-sum || p.Key != promo.Key(id, 1) || p.Shard != l.Shards[0] {
		t.Errorf("want %d buckets on shards %v, remaining %v (sum %d of %d): %s", k, l.Shards, remaining, sum, total, r)
	}
}

// A promotion in 4 buckets: 4 hashes on 4 distinct shards holding their shares,
// shown summed and by bucket; patches move the shares, a total below a bucket's
// grants is refused naming it and changes nothing; stop and delete reach every
// bucket.
func TestPromotionInBuckets(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("buckets")
	const k = 4
	l := bucketsCreate(t, e, id, k)
	bucketsGrant(t, e, id, k, l)
	bucketsPatch(t, e, id, k, l)
	bucketsStopAndDelete(t, e, id, k)
}

// bucketsCreate creates id in k buckets of 10 units, on k shards, and returns
// where they live.
func bucketsCreate(t *testing.T, e *admintest.Env, id string, k int) bucket.Layout {
	t.Helper()
	r := e.Do(http.MethodPost, "/v1/promotions", admin, bucketSpec(e, id, k, 10))
	if r.Status != http.StatusCreated {
		t.Fatalf("create in %d buckets: %s", k, r)
	}
	wantBuckets(t, e, r, id, k, 10, 3, 3, 2, 2)
	l := e.Layout(id, 1, k)
	if len(l.Keys) != k || l.Keys[0] != promo.Key(id, 1) {
		t.Fatalf("layout %+v", l)
	}
	seen := map[int]bool{}
	for _, s := range l.Shards {
		seen[s] = true
	}
	if len(seen) != k {
		t.Errorf("buckets share shards: %v", l.Shards)
	}
	hashes, _ := e.Buckets(id, 1, k)
	for b, h := range hashes {
		if h.RateLimit != 250 || h.Buckets != int64(k) {
			t.Errorf("bucket %d: rate limit %d of 1000, buckets %d: %+v", b, h.RateLimit, h.Buckets, h)
		}
	}
	e.Agree(id, 1)

	return l
}

// bucketsGrant takes from buckets 2 and 0: get and list show each bucket's units.
func bucketsGrant(t *testing.T, e *admintest.Env, id string, k int, l bucket.Layout) {
	t.Helper()
	e.Take(id, k, 2, "p1", 2) // bucket 2 sold out
	e.Take(id, k, 0, "p2", 1)
	r := e.Do(http.MethodGet, path(id), viewer, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("get: %s", r)
	}
	wantBuckets(t, e, r, id, k, 10, 2, 3, 0, 2)
	if r := e.Do(http.MethodGet, "/v1/promotions?limit=500", viewer, nil); !strings.Contains(string(r.Body), `"buckets":4,`) ||
		!strings.Contains(string(r.Body), fmt.Sprintf(`"bucketShards":[%d,%d,%d,%d]`, l.Shards[0], l.Shards[1], l.Shards[2], l.Shards[3])) {
		t.Errorf("the list does not show the buckets: %s", r)
	}

}

// bucketsPatch raises and lowers the total over the buckets' grants; the count
// of buckets is fixed.
func bucketsPatch(t *testing.T, e *admintest.Env, id string, k int, l bucket.Layout) {
	t.Helper()
	// Raised: every bucket to its share of 14 ([4 4 3 3]), less its grants.
	r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 14, "rateLimit": map[string]any{"limit": 10}})
	if r.Status != http.StatusOK {
		t.Fatalf("patch up: %s", r)
	}
	wantBuckets(t, e, r, id, k, 14, 3, 4, 1, 3)
	e.Agree(id, 1)

	// 9 is [3 2 2 2]: bucket 2 has granted 2, its share is 2, fine; 7 is [2 2 2 1],
	// fine too; 6 is [2 2 1 1]: bucket 2's 2 grants exceed its share 1.
	before := e.BucketSnapshot(id, 1, k) + e.Snapshot(store.ID{PromoID: id, Type: 1})
	r = e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 6})
	if r.Status != http.StatusConflict || r.Error().Code != "BELOW_GRANTED" ||
		!strings.Contains(r.Error().Message, fmt.Sprintf("bucket 2 of 4 (redis shard %d)", l.Shards[2])) ||
		!strings.Contains(r.Error().Message, "granted: 2, above its share 1") {
		t.Errorf("patch below bucket 2's grants: want 409 BELOW_GRANTED naming bucket 2, its shard, grants and share, have %s", r)
	}
	if after := e.BucketSnapshot(id, 1, k) + e.Snapshot(store.ID{PromoID: id, Type: 1}); after != before {
		t.Errorf("a refused patch changed something:\nbefore %s\nafter  %s", before, after)
	}
	r = e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 7})
	if r.Status != http.StatusOK {
		t.Fatalf("patch down: %s", r)
	}
	wantBuckets(t, e, r, id, k, 7, 1, 2, 0, 1)
	e.Agree(id, 1)

	// The count is fixed: the same count is accepted, another refused.
	if r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"buckets": 2, "total": 8}); r.Status != http.StatusBadRequest || r.Error().Field != "buckets" {
		t.Errorf("patch of the bucket count: want 400 naming buckets, have %s", r)
	}
	if r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"buckets": k, "perPinLimit": 5}); r.Status != http.StatusOK || r.Promotion().PerPinLimit != 5 {
		t.Errorf("patch naming the promotion's own count: %s", r)
	}
	e.Agree(id, 1)

}

// bucketsStopAndDelete stops id on every bucket, then deletes every bucket.
func bucketsStopAndDelete(t *testing.T, e *admintest.Env, id string, k int) {
	t.Helper()
	r := e.Do(http.MethodPost, path(id)+"/stop", admin, nil)
	if r.Status != http.StatusOK || r.Promotion().State != promo.Stopped {
		t.Fatalf("stop: %s", r)
	}
	hashes, _ := e.Buckets(id, 1, k)
	for b, h := range hashes {
		if h.State != string(promo.Stopped) {
			t.Errorf("bucket %d not stopped: %+v", b, h)
		}
	}
	e.Agree(id, 1)

	r = e.Do(http.MethodGet, path(id)+"/history", viewer, nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"buckets":4`) {
		t.Errorf("history: %s", r)
	}

	if r := e.Do(http.MethodDelete, path(id), admin, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	if _, exists := e.Buckets(id, 1, k); slices.Contains(exists, true) {
		t.Errorf("buckets left after delete: %v", exists)
	}
	e.Agree(id, 1)
}

// An ordinary promotion answers as before buckets existed: no bucket fields.
func TestOrdinaryPromotionShowsNoBuckets(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("single")
	spec := e.Spec(id)
	spec["buckets"] = 1
	r := e.Do(http.MethodPost, "/v1/promotions", admin, spec)
	if r.Status != http.StatusCreated || strings.Contains(string(r.Body), "bucket") {
		t.Fatalf("create in 1 bucket: %s", r)
	}
	e.Create(uid("plain"))
	for _, p := range []string{path(id), "/v1/promotions?limit=500"} {
		if r := e.Do(http.MethodGet, p, viewer, nil); r.Status != http.StatusOK || strings.Contains(string(r.Body), "bucket") {
			t.Errorf("GET %s shows buckets: %s", p, r)
		}
	}
	if h, _ := e.Hash(id, 1); h.Buckets != 1 {
		t.Errorf("hash: %+v", h)
	}
}

// Bad bucket counts are 400 naming buckets, and nothing is created.
func TestInvalidBuckets(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	for _, c := range []struct {
		name    string
		buckets any
		total   int64
	}{
		{"zero", 0, 100}, {"negative", -1, 100}, {"above 16", 17, 100},
		{"a string", "4", 100}, {"a fraction", 2.5, 100}, {"more than total", 4, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := uid("bad-k")
			spec := bucketSpec(e, id, 0, c.total)
			spec["buckets"] = c.buckets
			r := e.Do(http.MethodPost, "/v1/promotions", admin, spec)
			if r.Status != http.StatusBadRequest || r.Error().Code != "INVALID_REQUEST" || r.Error().Field != "buckets" {
				t.Errorf("buckets %v: want 400 naming buckets, have %s", c.buckets, r)
			}
			if _, ok := e.Row(id, 1); ok {
				t.Error("a row was written")
			}
			if _, exists := e.Buckets(id, 1, bucket.Max); slices.Contains(exists, true) {
				t.Errorf("hashes were written: %v", exists)
			}
		})
	}
	id := uid("patch-k")
	e.Create(id)
	before := e.Snapshot(store.ID{PromoID: id, Type: 1})
	for _, body := range []map[string]any{{"buckets": 4}, {"buckets": 2, "total": 50}, {"buckets": 0}} {
		if r := e.Do(http.MethodPatch, path(id), admin, body); r.Status != http.StatusBadRequest || r.Error().Field != "buckets" {
			t.Errorf("patch %v of a promotion in 1 bucket: want 400 naming buckets, have %s", body, r)
		}
	}
	if r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"buckets": 1}); r.Status != http.StatusBadRequest || r.Error().Field != "body" {
		t.Errorf("patch naming only the promotion's own count changes nothing: want 400 naming body, have %s", r)
	}
	if after := e.Snapshot(store.ID{PromoID: id, Type: 1}); after != before {
		t.Errorf("a refused patch changed something:\nbefore %s\nafter  %s", before, after)
	}
}
