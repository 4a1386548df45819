package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
)

func open(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), testenv.MySQLDSN(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func spec(id string, total int64) promo.Spec {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	return promo.Spec{
		PromoID: id, Type: 1, Title: "t " + id, Total: total, PerPinLimit: 2, PerIPLimit: 5,
		MaxPerGrab: 1, RateLimit: &promo.RateLimit{Limit: 100, WindowSeconds: 60},
		StartAt: start, EndAt: start.Add(time.Hour),
	}
}

// create inserts and promotes a promotion, as a successful create does.
func create(t *testing.T, s *store.Store, sp promo.Spec, at time.Time) store.Promotion {
	t.Helper()
	ctx := context.Background()
	p := store.NewPromotion(sp, promo.Active, at)
	if err := s.Promotions.Insert(ctx, p); err != nil {
		t.Fatalf("insert %s: %v", sp.PromoID, err)
	}
	out, err := s.Promotions.Promote(ctx, p.ID(), 1, at)
	if err != nil {
		t.Fatalf("promote %s: %v", sp.PromoID, err)
	}
	return out
}

func TestOpenCreatesTheDatabaseAndMigratesOnce(t *testing.T) {
	t.Parallel()
	// A database name nobody created: Open must create it.
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = "t_new_" + testenv.Suffix()
	dsn := cfg.FormatDSN()
	ctx := context.Background()

	// Several processes starting at once: every Open succeeds, each migration runs once.
	var wg sync.WaitGroup
	stores := make([]*store.Store, 4)
	errs := make([]error, 4)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = store.Open(ctx, dsn)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	s := stores[0]
	t.Cleanup(func() {
		_, _ = s.DB().Exec("DROP DATABASE IF EXISTS " + cfg.DBName)
		for _, s := range stores {
			s.Close()
		}
	})
	migrations, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.DB().Get(&n, "SELECT COUNT(*) FROM schema_migrations"); err != nil {
		t.Fatal(err)
	}
	if n != len(migrations) {
		t.Errorf("schema_migrations rows: want %d, have %d", len(migrations), n)
	}
	for _, table := range []string{"promotion", "grab_flow"} {
		var c int
		if err := s.DB().Get(&c, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?", cfg.DBName, table); err != nil || c != 1 {
			t.Errorf("table %s: want it created, have count %d, err %v", table, c, err)
		}
	}
	// Opening again applies nothing new.
	again, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	if err := s.DB().Get(&n, "SELECT COUNT(*) FROM schema_migrations"); err != nil || n != len(migrations) {
		t.Errorf("after a second open: want %d migrations, have %d (%v)", len(migrations), n, err)
	}
}

func TestOpenRefusesADSNWithoutDatabase(t *testing.T) {
	t.Parallel()
	if _, err := store.Open(context.Background(), "root@tcp(127.0.0.1:3306)/"); err == nil {
		t.Fatal("want an error for a DSN naming no database")
	}
}

func TestGrabFlowContractColumns(t *testing.T) {
	t.Parallel()
	s := open(t)
	ins := `INSERT INTO grab_flow (event_id, kind, request_id, pin, ip, promo_id, promo_type, num, shard, occurred_at)
 VALUES (?, ?, ?, 'pin-1', '10.0.0.1', 'P1', 1, ?, 3, ?)`
	now := time.Now().UTC()
	for _, r := range []struct {
		event, kind, req string
		num              int64
	}{{"e1", "GRAB", "r1", 3}, {"e2", "GRAB", "r2", 2}, {"e3", "CANCEL", "r1", 3}} {
		if _, err := s.DB().Exec(ins, r.event, r.kind, r.req, r.num, now); err != nil {
			t.Fatalf("insert %s: %v", r.event, err)
		}
	}
	// One row per (request_id, kind, promo_id, promo_type).
	if _, err := s.DB().Exec(ins, "e4", "GRAB", "r1", 3, now); err == nil {
		t.Error("a second GRAB of r1 was accepted")
	}
	var granted int64
	if err := s.DB().Get(&granted, `SELECT COALESCE(SUM(CASE kind WHEN 'GRAB' THEN num ELSE -num END), 0)
 FROM grab_flow WHERE promo_id = ? AND promo_type = ?`, "P1", 1); err != nil {
		t.Fatal(err)
	}
	if granted != 2 {
		t.Errorf("granted by the record: want 2, have %d", granted)
	}
}

func TestCreateIsInvisibleUntilPromoted(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	at := time.Now()
	p := store.NewPromotion(spec("A", 10), promo.Active, at)
	if err := s.Promotions.Insert(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Promotions.Get(ctx, p.ID()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get of a pending create: want ErrNotFound, have %v", err)
	}
	page, err := s.Promotions.List(ctx, store.ListQuery{Now: at})
	if err != nil || len(page.Items) != 0 {
		t.Errorf("list with a pending create: want nothing, have %d items (%v)", len(page.Items), err)
	}
	if err := s.Promotions.Insert(ctx, p); !errors.Is(err, store.ErrExists) {
		t.Errorf("second insert: want ErrExists, have %v", err)
	}
	got, err := s.Promotions.Promote(ctx, p.ID(), 1, at)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 || got.Pending != nil || got.Remaining != 10 || got.State != promo.Active {
		t.Errorf("promoted row: %+v", got)
	}
	have, err := s.Promotions.Get(ctx, p.ID())
	if err != nil {
		t.Fatal(err)
	}
	want := spec("A", 10)
	if have.Spec.Total != want.Total || !have.Spec.StartAt.Equal(want.StartAt) || !have.Spec.EndAt.Equal(want.EndAt) ||
		have.Spec.RateLimit == nil || *have.Spec.RateLimit != *want.RateLimit || have.Spec.Title != want.Title ||
		have.Spec.PerPinLimit != 2 || have.Spec.PerIPLimit != 5 || have.Spec.MaxPerGrab != 1 {
		t.Errorf("stored spec: want %+v, have %+v", want, have.Spec)
	}
	if _, err := s.Promotions.Promote(ctx, p.ID(), 1, at); !errors.Is(err, store.ErrNoPending) {
		t.Errorf("second promote: want ErrNoPending, have %v", err)
	}
}

func TestPromoteMovesRemainingByTheChangeOfTotal(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	p := create(t, s, spec("B", 10), time.Now())
	// The flow sink has counted 4 granted.
	if _, err := s.DB().Exec("UPDATE promotion SET remaining = remaining - 4 WHERE promo_id = 'B'"); err != nil {
		t.Fatal(err)
	}
	next := p.Spec
	next.Total = 25
	if _, err := s.Promotions.Update(ctx, p.ID(), func(p *store.Promotion) error {
		return p.Propose(store.OpPatch, next, promo.Active, time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Promotions.Promote(ctx, p.ID(), 2, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got.Remaining != 21 || got.Spec.Total != 25 || got.Version != 2 {
		t.Errorf("after patch: want total 25, remaining 21, version 2; have %d, %d, %d", got.Spec.Total, got.Remaining, got.Version)
	}
}

func TestProposeRefusesWhileAChangeIsPending(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	p := create(t, s, spec("C", 10), time.Now())
	stop := func(pr *store.Promotion) error {
		return pr.Propose(store.OpStop, pr.Spec, promo.Stopped, time.Now())
	}
	pending, err := s.Promotions.Update(ctx, p.ID(), stop)
	if err != nil {
		t.Fatal(err)
	}
	if pending.Pending == nil || pending.Pending.Version != 2 || pending.Pending.Op != store.OpStop || pending.Pending.State != promo.Stopped {
		t.Fatalf("pending: %+v", pending.Pending)
	}
	if _, err := s.Promotions.Update(ctx, p.ID(), stop); !errors.Is(err, store.ErrBusy) {
		t.Errorf("second propose: want ErrBusy, have %v", err)
	}
	// Readers see the committed row only.
	got, err := s.Promotions.Get(ctx, p.ID())
	if err != nil || got.State != promo.Active || got.Version != 1 || got.Pending == nil {
		t.Errorf("get while pending: state %s version %d pending %v err %v", got.State, got.Version, got.Pending, err)
	}
	if err := s.Promotions.Discard(ctx, p.ID(), 3); !errors.Is(err, store.ErrNoPending) {
		t.Errorf("discard of another version: want ErrNoPending, have %v", err)
	}
	if err := s.Promotions.Discard(ctx, p.ID(), 2); err != nil {
		t.Fatal(err)
	}
	got, err = s.Promotions.Get(ctx, p.ID())
	if err != nil || got.Pending != nil || got.Version != 1 || got.State != promo.Active {
		t.Errorf("after discard: %+v, %v", got, err)
	}
}

func TestDiscardOfACreateRemovesTheRow(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	p := store.NewPromotion(spec("D", 10), promo.Active, time.Now())
	if err := s.Promotions.Insert(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.Promotions.Discard(ctx, p.ID(), 1); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.DB().Get(&n, "SELECT COUNT(*) FROM promotion WHERE promo_id = 'D'"); err != nil || n != 0 {
		t.Errorf("rows after discarding a create: want 0, have %d (%v)", n, err)
	}
	// The id is free again.
	if err := s.Promotions.Insert(ctx, p); err != nil {
		t.Errorf("insert after discard: %v", err)
	}
}

func TestUpdateRollsBackWhenTheClosureFails(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	p := create(t, s, spec("E", 10), time.Now())
	boom := errors.New("boom")
	_, err := s.Promotions.Update(ctx, p.ID(), func(p *store.Promotion) error {
		p.Spec.Total = 999
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("want the closure's error wrapped, have %v", err)
	}
	got, _ := s.Promotions.Get(ctx, p.ID())
	if got.Spec.Total != 10 {
		t.Errorf("total after a failed update: want 10, have %d", got.Spec.Total)
	}
	if _, err := s.Promotions.Update(ctx, store.ID{PromoID: "nope", Type: 1}, func(*store.Promotion) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a missing row: want ErrNotFound, have %v", err)
	}
}

func TestPendingListsOldChangesFirst(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	base := time.Now().Add(-time.Minute)
	for i, id := range []string{"P2", "P1", "P3"} {
		p := store.NewPromotion(spec(id, 1), promo.Active, base.Add(time.Duration([]int{2, 1, 40}[i])*time.Second))
		if err := s.Promotions.Insert(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := s.Promotions.Pending(ctx, base.Add(10*time.Second), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0].PromoID != "P1" || ids[1].PromoID != "P2" {
		t.Errorf("pending before +10s: want [P1 P2], have %v", ids)
	}
}

func TestListPagesNewestFirstAndFiltersByState(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 30, 0, 0, time.UTC) // inside spec's hour
	base := time.Date(2029, 6, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 7; i++ {
		id := fmt.Sprintf("L%d", i)
		// Two rows share each creation instant: the key breaks the tie.
		create(t, s, spec(id, 10), base.Add(time.Duration(i/2)*time.Second))
	}
	// Walk the pages.
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("too many pages")
		}
		page, err := s.Promotions.List(ctx, store.ListQuery{Now: now, Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Items {
			seen = append(seen, p.Spec.PromoID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	want := []string{"L6", "L5", "L4", "L3", "L2", "L1", "L0"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("pages: want %v, have %v", want, seen)
	}

	// States: L0 stopped, L1 deleted, L2 sold out by the record.
	setState := func(id string, st promo.State) {
		if _, err := s.DB().Exec("UPDATE promotion SET state = ? WHERE promo_id = ?", string(st), id); err != nil {
			t.Fatal(err)
		}
	}
	setState("L0", promo.Stopped)
	setState("L1", promo.Deleted)
	if _, err := s.DB().Exec("UPDATE promotion SET remaining = 0 WHERE promo_id = 'L2'"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		state promo.State
		now   time.Time
		want  string
	}{
		{"", now, "[L6 L5 L4 L3 L2 L0]"},
		{promo.Stopped, now, "[L0]"},
		{promo.Deleted, now, "[L1]"},
		{promo.SoldOut, now, "[L2]"},
		{promo.Active, now, "[L6 L5 L4 L3]"},
		{promo.Scheduled, now.Add(-time.Hour), "[L6 L5 L4 L3 L2]"},
		{promo.Ended, now.Add(time.Hour), "[L6 L5 L4 L3 L2]"},
		{promo.Ended, now, "[]"},
	} {
		page, err := s.Promotions.List(ctx, store.ListQuery{State: tc.state, Now: tc.now, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		var have []string
		for _, p := range page.Items {
			have = append(have, p.Spec.PromoID)
		}
		if fmt.Sprint(have) != tc.want && !(tc.want == "[]" && len(have) == 0) {
			t.Errorf("state %q at %s: want %s, have %v", tc.state, tc.now, tc.want, have)
		}
	}

	for _, bad := range []string{"x", "eyJ9", "e30", "!!!"} {
		if _, err := s.Promotions.List(ctx, store.ListQuery{Now: now, Cursor: bad}); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %q: want ErrBadCursor, have %v", bad, err)
		}
		if store.ValidCursor(bad) {
			t.Errorf("ValidCursor(%q) = true", bad)
		}
	}
	if _, err := s.Promotions.List(ctx, store.ListQuery{Now: now, Limit: 501}); err == nil {
		t.Error("limit 501: want an error")
	}
}

// The reconciler's list keeps to promotions whose sale ends after the given time:
// one ended long ago, and a deleted one, are not in it; PromotionKeys has all but
// the deleted.
func TestPromotionKeysEndingAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t)
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	old := spec("OLD", 1)
	old.StartAt, old.EndAt = at.Add(-72*time.Hour), at.Add(-48*time.Hour)
	create(t, s, old, at)
	create(t, s, spec("NOW", 1), at)
	gone := create(t, s, spec("GONE", 1), at)
	if _, err := s.DB().ExecContext(ctx, `UPDATE promotion SET state = ? WHERE promo_id = ?`, string(promo.Deleted), gone.Spec.PromoID); err != nil {
		t.Fatal(err)
	}
	recent, err := s.Keys.PromotionKeysEndingAfter(ctx, at.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{promo.Key("NOW", 1)}; !slices.Equal(recent, want) {
		t.Fatalf("ending after a day ago: %v, want %v", recent, want)
	}
	all, err := s.Keys.PromotionKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	if want := []string{promo.Key("NOW", 1), promo.Key("OLD", 1)}; !slices.Equal(all, want) {
		t.Fatalf("all not deleted: %v, want %v", all, want)
	}
}
