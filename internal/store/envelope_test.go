package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
)

// poolSpec is a pool of total envelopes summing to amount, each at least min.
func poolSpec(id string, total, amount, min int64) promo.Spec {
	s := spec(id, total)
	s.Envelope = &promo.Envelope{Amount: amount, MinAmount: min}
	return s
}

// countParts is how many rows of promotion_envelope the key has.
func countParts(t *testing.T, s *store.Store, id string) int {
	t.Helper()
	var n int
	if err := s.DB().Get(&n, `SELECT COUNT(*) FROM promotion_envelope WHERE promo_id = ? AND promo_type = 1`, id); err != nil {
		t.Fatal(err)
	}
	return n
}

// A pool's row goes in with its split, in more than one statement for a large
// pool; the row reads back with its envelope and the split in idx order; a
// discarded create takes its split with it.
func TestPoolRowAndItsSplit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t)
	at := time.Now()
	const n = 2500 // three statements of parts
	sp := poolSpec("POOL", n, 1_000_000, 7)
	parts := make([]int64, n)
	for i := range parts {
		parts[i] = 400 // 2500 * 400 = 1,000,000
	}
	parts[0], parts[n-1] = 399, 401
	p := store.NewPromotion(sp, promo.Active, at)
	if err := s.Promotions.InsertPool(ctx, p, parts); err != nil {
		t.Fatal(err)
	}
	got, err := s.Promotions.EnvelopeParts(ctx, p.ID())
	if err != nil || !slices.Equal(got, parts) {
		t.Fatalf("parts read back: %d of them (err %v), want the %d written in order", len(got), err, n)
	}
	row, err := s.Promotions.Row(ctx, p.ID())
	if err != nil || row.Spec.Envelope == nil || *row.Spec.Envelope != (promo.Envelope{Amount: 1_000_000, MinAmount: 7}) ||
		row.Pending == nil || row.Pending.Spec.Envelope == nil || row.Pending.Spec.Envelope.Amount != 1_000_000 {
		t.Fatalf("the row's envelope: %+v (err %v)", row, err)
	}

	if err := s.Promotions.Discard(ctx, p.ID(), 1); err != nil {
		t.Fatal(err)
	}
	if c := countParts(t, s, "POOL"); c != 0 {
		t.Errorf("a discarded create left %d parts", c)
	}
	if _, err := s.Promotions.EnvelopeParts(ctx, p.ID()); !errors.Is(err, store.ErrNoParts) {
		t.Errorf("parts of a discarded pool: want ErrNoParts, have %v", err)
	}

	// Created again and committed: the row, Get and the list show the pool.
	create(t, s, spec("PLAIN", 5), at)
	p = store.NewPromotion(sp, promo.Active, at)
	if err := s.Promotions.InsertPool(ctx, p, parts); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Promotions.Promote(ctx, p.ID(), 1, at); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Promotions.Get(ctx, p.ID()); err != nil || got.Spec.Envelope == nil || got.RemainingAmount != 1_000_000 {
		t.Errorf("get: %+v (err %v)", got, err)
	}
}

// The wrong parts for the spec are refused before anything is written: a pool
// without its split, a split of another size, parts for a promotion that is no pool.
func TestInsertRefusesPartsThatAreNotTheSplit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t)
	for _, c := range []struct {
		name  string
		spec  promo.Spec
		parts []int64
	}{
		{"pool without parts", poolSpec("A", 3, 30, 1), nil},
		{"too few parts", poolSpec("B", 3, 30, 1), []int64{10, 20}},
		{"parts of no pool", spec("C", 2), []int64{1, 1}},
	} {
		p := store.NewPromotion(c.spec, promo.Active, time.Now())
		if err := s.Promotions.InsertPool(ctx, p, c.parts); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
		if _, err := s.Promotions.Row(ctx, p.ID()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: a row was written (%v)", c.name, err)
		}
		if n := countParts(t, s, c.spec.PromoID); n != 0 {
			t.Errorf("%s: %d parts were written", c.name, n)
		}
	}
}

// A create whose transaction fails part way through the split leaves nothing: no
// row, none of its parts. (A stray part row in the way of the third statement
// makes it fail after the row and two statements of parts went in.)
func TestFailedPoolInsertLeavesNoParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t)
	if _, err := s.DB().Exec(`INSERT INTO promotion_envelope (promo_id, promo_type, idx, amount) VALUES ('X', 1, 2100, 5)`); err != nil {
		t.Fatal(err)
	}
	parts := make([]int64, 2500)
	for i := range parts {
		parts[i] = 1
	}
	p := store.NewPromotion(poolSpec("X", 2500, 2500, 1), promo.Active, time.Now())
	err := s.Promotions.InsertPool(ctx, p, parts)
	if err == nil || errors.Is(err, store.ErrExists) {
		t.Fatalf("insert over a stray part: want an error other than ErrExists, have %v", err)
	}
	if _, err := s.Promotions.Row(ctx, p.ID()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the row outlived its failed transaction (%v)", err)
	}
	if n := countParts(t, s, "X"); n != 1 {
		t.Errorf("%d part rows, want only the stray one", n)
	}
}

// The list shows a pool's amount left by the record: its budget less the amounts
// of its GRAB rows plus those of its CANCEL rows; a promotion that is no pool has none.
func TestListShowsThePoolsAmountLeftByTheRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t)
	at := time.Now()
	p := store.NewPromotion(poolSpec("P", 4, 100, 10), promo.Active, at)
	if err := s.Promotions.InsertPool(ctx, p, []int64{10, 40, 20, 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Promotions.Promote(ctx, p.ID(), 1, at); err != nil {
		t.Fatal(err)
	}
	create(t, s, spec("Q", 4), at)
	for i, f := range []struct {
		kind, rid, promo string
		amount           any
	}{
		{"GRAB", "r1", "P", 50}, {"GRAB", "r2", "P", 20}, {"CANCEL", "r1", "P", 50}, {"GRAB", "r3", "P", 30},
		{"GRAB", "r4", "Q", nil},
	} {
		if _, err := s.DB().Exec(`INSERT INTO grab_flow (event_id, kind, request_id, pin, ip, promo_id, promo_type, num, shard, occurred_at, amount)
 VALUES (?, ?, ?, 'pin', '10.0.0.1', ?, 1, 1, 0, ?, ?)`, "e"+string(rune('0'+i)), f.kind, f.rid, f.promo, at, f.amount); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.Promotions.List(ctx, store.ListQuery{Now: at, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, it := range page.Items {
		switch it.Spec.PromoID {
		case "P":
			seen++
			if it.Spec.Envelope == nil || it.RemainingAmount != 50 {
				t.Errorf("pool in the list: envelope %+v, amount left %d, want 100 - 50 - 20 + 50 - 30 = 50", it.Spec.Envelope, it.RemainingAmount)
			}
		case "Q":
			seen++
			if it.Spec.Envelope != nil || it.RemainingAmount != 0 {
				t.Errorf("a promotion that is no pool: envelope %+v, amount left %d", it.Spec.Envelope, it.RemainingAmount)
			}
		}
	}
	if seen != 2 {
		t.Errorf("listed %d of the 2 promotions", seen)
	}
	if got, err := s.Promotions.Get(ctx, p.ID()); err != nil || got.RemainingAmount != 50 {
		t.Errorf("get: amount left %d (err %v), want 50", got.RemainingAmount, err)
	}
}

// One reader serves every split: a pool's budget and parts in idx order; a
// promotion that is no pool, or none, is no split; a split with a gap is an error,
// from EnvelopeParts too.
func TestEnvelopeSplitReadsBackOrRefusesAGap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t)
	at := time.Now()
	p := store.NewPromotion(poolSpec("SPLIT", 3, 60, 10), promo.Active, at)
	if err := s.Promotions.InsertPool(ctx, p, []int64{10, 20, 30}); err != nil {
		t.Fatal(err)
	}
	create(t, s, spec("NOPOOL", 3), at)
	split, ok, err := store.ReadEnvelopeSplit(ctx, s.DB(), p.ID())
	if err != nil || !ok || split.Amount != 60 || !slices.Equal(split.Parts, []int64{10, 20, 30}) {
		t.Fatalf("split: %+v ok %v (err %v)", split, ok, err)
	}
	for _, id := range []store.ID{{PromoID: "NOPOOL", Type: 1}, {PromoID: "ABSENT", Type: 1}} {
		if _, ok, err := s.Rebuild.EnvelopeSplit(ctx, id); ok || err != nil {
			t.Errorf("%s: ok %v, %v; want no split", id, ok, err)
		}
	}
	if _, err := s.DB().Exec(`DELETE FROM promotion_envelope WHERE promo_id = 'SPLIT' AND idx = 1`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Rebuild.EnvelopeSplit(ctx, p.ID()); err == nil || !strings.Contains(err.Error(), "gap") {
		t.Errorf("a split with a gap: %v; want an error naming the gap", err)
	}
	if _, err := s.Promotions.EnvelopeParts(ctx, p.ID()); err == nil || errors.Is(err, store.ErrNoParts) {
		t.Errorf("EnvelopeParts of a split with a gap: %v; want an error other than ErrNoParts", err)
	}
}
