package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// poolBody is a create body for id: a pool of total envelopes summing to amount,
// each at least min.
func poolBody(e *admintest.Env, id string, total, amount, min int64) map[string]any {
	s := e.Spec(id)
	s["total"] = total
	s["envelope"] = map[string]any{"amount": amount, "minAmount": min}
	return s
}

// envelopeOf is the envelope an answer shows.
func envelopeOf(t *testing.T, r admintest.Response) promo.Envelope {
	t.Helper()
	p := r.Promotion()
	if p.Envelope == nil || p.Envelope.RemainingAmount == nil {
		t.Fatalf("no envelope with its remainingAmount in %s", r)
	}
	return *p.Envelope
}

func wantEnvelope(t *testing.T, what string, have promo.Envelope, amount, min, left int64) {
	t.Helper()
	if have.Amount != amount || have.MinAmount != min || have.RemainingAmount == nil || *have.RemainingAmount != left {
		t.Errorf("%s: envelope %+v (left %v), want amount %d, minAmount %d, remainingAmount %d", what, have, have.RemainingAmount, amount, min, left)
	}
}

// An envelope pool: its split in MySQL (total parts of at least min summing to
// the budget) is what its shard holds in hand-out order; GET shows the amount left
// live, the list the record's, the history the pool's spec; a PATCH of its size is
// 409 ENVELOPE_FIXED and changes nothing, of its end time, limits and rate fine;
// stop and delete as any promotion, the split kept in MySQL.
func TestEnvelopePool(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("pool")
	split := poolCreate(t, e, id)
	poolGrantAndList(t, e, id, split)
	poolPatch(t, e, id, split)
	poolHistoryStopDelete(t, e, id, split)
}

// The pool of TestEnvelopePool: n envelopes splitting amount, each at least min.
const poolN, poolAmount, poolMin = 50, 10_000, 20

// poolCreate creates the pool id and returns its split, which the record and the
// shard hold alike.
func poolCreate(t *testing.T, e *admintest.Env, id string) []int64 {
	t.Helper()
	const n, amount, min = poolN, poolAmount, poolMin
	ref := store.ID{PromoID: id, Type: 1}
	r := e.Do(http.MethodPost, "/v1/promotions", admin, poolBody(e, id, n, amount, min))
	if r.Status != http.StatusCreated {
		t.Fatalf("create the pool: %s", r)
	}
	wantEnvelope(t, "create", envelopeOf(t, r), amount, min, amount)

	split, err := e.App.Store.Promotions.EnvelopeParts(context.Background(), ref)
	if err != nil || len(split) != n {
		t.Fatalf("the record's split: %d parts (err %v), want %d", len(split), err, n)
	}
	var sum int64
	for i, a := range split {
		if a < min {
			t.Errorf("part %d is %d, below the minimum %d", i, a, min)
		}
		sum += a
	}
	if sum != amount {
		t.Errorf("the parts sum to %d, want %d", sum, amount)
	}
	left, order := e.Pool(id, 1)
	if len(left) != n || !slices.Equal(order, seq(n)) {
		t.Errorf("the shard holds parts %v, want idx 0..%d in order", order, n-1)
	}
	for i, a := range split {
		if left[i] != a {
			t.Errorf("part %d: the shard holds %d, the record %d", i, left[i], a)
		}
	}
	if h, _ := e.Hash(id, 1); h.EnvAmount != amount || h.EnvLeft != amount || h.Remaining != n {
		t.Errorf("hash: envAmount %d, envLeft %d, remaining %d", h.EnvAmount, h.EnvLeft, h.Remaining)
	}
	e.Agree(id, 1)

	return split
}

// poolGrantAndList hands out two envelopes: get shows the amount left, the list
// the record's.
func poolGrantAndList(t *testing.T, e *admintest.Env, id string, split []int64) {
	t.Helper()
	const n, amount, min = poolN, poolAmount, poolMin
	// Two envelopes handed out (the two of lowest idx): GET reads what is left
	// from the shard; the list, whose counters are the record's, has no flow row yet.
	e.Take(id, 1, 0, "p1", 2)
	r := e.Do(http.MethodGet, path(id), viewer, nil)
	if r.Status != http.StatusOK || r.Promotion().Remaining != n-2 {
		t.Fatalf("get: %s", r)
	}
	wantEnvelope(t, "get", envelopeOf(t, r), amount, min, amount-split[0]-split[1])
	r = e.Do(http.MethodGet, "/v1/promotions?limit=500", viewer, nil)
	var page struct{ Items []promo.Promotion }
	if err := json.Unmarshal(r.Body, &page); err != nil || r.Status != http.StatusOK {
		t.Fatalf("list: %s", r)
	}
	listed := false
	for _, p := range page.Items {
		if p.PromoID == id {
			listed = true
			if p.Envelope == nil {
				t.Fatalf("the list shows no envelope: %+v", p)
			}
			wantEnvelope(t, "list", *p.Envelope, amount, min, amount)
		} else if p.Envelope != nil {
			t.Errorf("a promotion that is no pool shows an envelope in the list: %+v", p)
		}
	}
	if !listed {
		t.Error("the pool is not listed")
	}

}

// poolPatch refuses a pool's other size and takes its end, limits and rate.
func poolPatch(t *testing.T, e *admintest.Env, id string, split []int64) {
	t.Helper()
	const n, amount, min = poolN, poolAmount, poolMin
	ref := store.ID{PromoID: id, Type: 1}
	// Its size is fixed: another total is refused and changes nothing.
	before := e.Snapshot(ref)
	for _, body := range []map[string]any{{"total": n + 10}, {"total": n - 1, "perPinLimit": 3}} {
		r := e.Do(http.MethodPatch, path(id), admin, body)
		if r.Status != http.StatusConflict || r.Error().Code != "ENVELOPE_FIXED" || !strings.Contains(r.Error().Message, "total") {
			t.Errorf("patch %v of a pool: want 409 ENVELOPE_FIXED naming total, have %s", body, r)
		}
	}
	if after := e.Snapshot(ref); after != before {
		t.Errorf("a refused patch changed something:\nbefore %s\nafter  %s", before, after)
	}
	// Its end, limits and rate may change; its own total changes nothing.
	end := e.Clock.Now().UTC().Add(48 * time.Hour).Truncate(time.Millisecond)
	r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"endAt": end.Format(time.RFC3339Nano), "total": n,
		"perPinLimit": 5, "perIpLimit": 50, "rateLimit": map[string]any{"limit": 77}})
	if p := r.Promotion(); r.Status != http.StatusOK || !p.EndAt.Equal(end) || p.PerPinLimit != 5 || p.Total != n || p.RateLimit == nil || p.RateLimit.Limit != 77 {
		t.Fatalf("patch of the end, limits and rate: %s", r)
	}
	wantEnvelope(t, "patch", envelopeOf(t, r), amount, min, amount-split[0]-split[1])
	e.Agree(id, 1)
	if got, _ := e.App.Store.Promotions.EnvelopeParts(context.Background(), ref); !slices.Equal(got, split) {
		t.Error("a patch changed the record's split")
	}

}

// poolHistoryStopDelete reads the pool's history, stops and deletes it: its
// split outlives it in the record.
func poolHistoryStopDelete(t *testing.T, e *admintest.Env, id string, split []int64) {
	t.Helper()
	ref := store.ID{PromoID: id, Type: 1}
	r := e.Do(http.MethodGet, path(id)+"/history", viewer, nil)
	if r.Status != http.StatusOK || strings.Count(string(r.Body), `"envelope":{"amount":10000,"minAmount":20}`) != 3 {
		t.Errorf("history: want the pool's envelope in the create's after and the patch's before and after: %s", r)
	}

	if r := e.Do(http.MethodPost, path(id)+"/stop", admin, nil); r.Status != http.StatusOK || r.Promotion().State != promo.Stopped {
		t.Fatalf("stop: %s", r)
	}
	e.Agree(id, 1)
	if r := e.Do(http.MethodDelete, path(id), admin, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	e.Agree(id, 1)
	if left, _ := e.Pool(id, 1); len(left) != 0 {
		t.Errorf("the shard kept %d parts after delete", len(left))
	}
	if got, _ := e.App.Store.Promotions.EnvelopeParts(context.Background(), ref); !slices.Equal(got, split) {
		t.Error("the record's split did not outlive the delete")
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// Bad pools are 400 naming the field, and nothing is written in MySQL or Redis.
func TestInvalidEnvelopePools(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	for _, c := range []badPool{
		{"amount below total * minAmount", 10, map[string]any{"amount": 99, "minAmount": 10}, 0, 0, "envelope"},
		{"minAmount 0", 10, map[string]any{"amount": 100, "minAmount": 0}, 0, 0, "envelope"},
		{"amount 0", 10, map[string]any{"amount": 0, "minAmount": 1}, 0, 0, "envelope"},
		{"amount above 10^12", 10, map[string]any{"amount": 1_000_000_000_001, "minAmount": 1}, 0, 0, "envelope"},
		{"remainingAmount given", 10, map[string]any{"amount": 100, "minAmount": 1, "remainingAmount": 100}, 0, 0, "envelope.remainingAmount"},
		{"unknown field", 10, map[string]any{"amount": 100, "minAmount": 1, "currency": "CNY"}, 0, 0, "envelope.currency"},
		{"amount missing", 10, map[string]any{"minAmount": 1}, 0, 0, "envelope.amount"},
		{"minAmount missing", 10, map[string]any{"amount": 100}, 0, 0, "envelope.minAmount"},
		{"amount not an integer", 10, map[string]any{"amount": 10.5, "minAmount": 1}, 0, 0, "envelope.amount"},
		{"not an object", 10, []int{100, 1}, 0, 0, "envelope"},
		{"null", 10, nil, 0, 0, "envelope"},
		{"in 2 buckets", 10, map[string]any{"amount": 100, "minAmount": 1}, 2, 0, "envelope"},
		{"above 100,000 envelopes", 100_001, map[string]any{"amount": 1_000_000, "minAmount": 1}, 0, 0, "total"},
		{"above 1,000 envelopes a grab", 2000, map[string]any{"amount": 2000, "minAmount": 1}, 0, 1001, "maxPerGrab"},
	} {
		t.Run(c.name, func(t *testing.T) { badPoolRefused(t, e, c) })
	}
	poolEnvelopeNotPatched(t, e)
}

// badPool is a create of an envelope pool the contract refuses, naming field.
type badPool struct {
	name     string
	total    int64
	envelope any
	buckets  int
	maxPer   int64 // maxPerGrab, 0: the default
	field    string
}

// badPoolRefused creates c: 400 naming its field, and nothing written anywhere.
func badPoolRefused(t *testing.T, e *admintest.Env, c badPool) {
	id := uid("bad-pool")
	body := e.Spec(id)
	body["total"], body["envelope"] = c.total, c.envelope
	if c.buckets > 0 {
		body["buckets"] = c.buckets
	}
	if c.maxPer > 0 {
		body["maxPerGrab"] = c.maxPer
	}
	r := e.Do(http.MethodPost, "/v1/promotions", admin, body)
	if r.Status != http.StatusBadRequest || r.Error().Code != "INVALID_REQUEST" || r.Error().Field != c.field {
		t.Errorf("want 400 naming %s, have %s", c.field, r)
	}
	ref := store.ID{PromoID: id, Type: 1}
	if _, ok := e.Row(id, 1); ok {
		t.Error("a row was written")
	}
	if _, err := e.App.Store.Promotions.EnvelopeParts(context.Background(), ref); err == nil {
		t.Error("parts were written")
	}
	if _, exists := e.Buckets(id, 1, bucket.Max); slices.Contains(exists, true) {
		t.Errorf("hashes were written: %v", exists)
	}
	if left, _ := e.Pool(id, 1); len(left) > 0 {
		t.Errorf("%d parts were written to the shard", len(left))
	}
}

// poolEnvelopeNotPatched: a PATCH has no envelope to change.
func poolEnvelopeNotPatched(t *testing.T, e *admintest.Env) {
	t.Helper()
	id := uid("pool")
	if r := e.Do(http.MethodPost, "/v1/promotions", admin, poolBody(e, id, 5, 50, 1)); r.Status != http.StatusCreated {
		t.Fatalf("create: %s", r)
	}
	before := e.Snapshot(store.ID{PromoID: id, Type: 1})
	if r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"envelope": map[string]any{"amount": 60, "minAmount": 1}}); r.Status != http.StatusBadRequest || r.Error().Field != "envelope" {
		t.Errorf("patch of the envelope: want 400 naming envelope, have %s", r)
	}
	if after := e.Snapshot(store.ID{PromoID: id, Type: 1}); after != before {
		t.Errorf("a refused patch changed something:\nbefore %s\nafter  %s", before, after)
	}
}
