package adminservice_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// An envelope pool's create through the journal: its split is written with the
// row, the shard loads the split read back from the record, and a create undone
// takes its split with it.

func poolSpec(e *admintest.Env, id string, total, amount int64) map[string]any {
	s := e.Spec(id)
	s["total"] = total
	s["envelope"] = map[string]any{"amount": amount, "minAmount": 1}
	return s
}

func createPool(e *admintest.Env, id string, total, amount int64) admintest.Response {
	return e.Do(http.MethodPost, "/v1/promotions", admintest.AdminToken, poolSpec(e, id, total, amount))
}

// parts is the record's split of id, nil when there is none.
func parts(t *testing.T, e *admintest.Env, id string) []int64 {
	t.Helper()
	p, err := e.App.Store.Promotions.EnvelopeParts(context.Background(), store.ID{PromoID: id, Type: 1})
	if errors.Is(err, store.ErrNoParts) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The shard loads the split as the record holds it when the create reaches it:
// the parts are read back from MySQL, not taken from the request's memory.
func TestPoolCreateLoadsTheRecordsSplit(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{Service: config()})
	id := "pool-split-" + testenv.Suffix()
	var once sync.Once
	adminservice.SetFaults(e.App.Admin, func() {
		once.Do(func() { // the row and its split are in, the shard not yet written
			if _, err := e.App.Store.DB().Exec(`UPDATE promotion_envelope SET amount = IF(idx = 0, 1, 999)
 WHERE promo_id = ? AND promo_type = 1`, id); err != nil {
				t.Error(err)
			}
		})
	}, nil)
	if r := createPool(e, id, 2, 1000); r.Status != http.StatusCreated {
		t.Fatalf("create: %s", r)
	}
	if left, _ := e.Pool(id, 1); len(left) != 2 || left[0] != 1 || left[1] != 999 {
		t.Errorf("the shard holds %v, want the record's split [0:1 1:999]", left)
	}
	e.Agree(id, 1)
}

// The row's transaction fails part way: 503 naming mysql, and nothing is left, no
// row, none of its parts, nothing on the shard. (A stray part row in the way of
// the second statement of parts makes it fail.)
func TestPoolCreateWhoseTransactionFailsLeavesNoParts(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{Service: config()})
	id := "pool-tx-" + testenv.Suffix()
	if _, err := e.App.Store.DB().Exec(`INSERT INTO promotion_envelope (promo_id, promo_type, idx, amount) VALUES (?, 1, 1500, 7)`, id); err != nil {
		t.Fatal(err)
	}
	r := createPool(e, id, 2000, 1_000_000)
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Error().Message, "mysql") {
		t.Fatalf("create whose transaction fails: want 503 naming mysql, have %s", r)
	}
	if _, ok := e.Row(id, 1); ok {
		t.Error("the row outlived its transaction")
	}
	var n int
	if err := e.App.Store.DB().Get(&n, `SELECT COUNT(*) FROM promotion_envelope WHERE promo_id = ?`, id); err != nil || n != 1 {
		t.Errorf("%d part rows (err %v), want only the stray one", n, err)
	}
	if _, ok := e.Hash(id, 1); ok {
		t.Error("the shard holds a hash")
	}
	if left, _ := e.Pool(id, 1); len(left) > 0 {
		t.Errorf("the shard holds %d parts", len(left))
	}
}

// The shard dies between the writes: the create is pending with its split; the
// repairer, finding no hash, drops the row and its split; the same request then
// creates the pool, the shard holding the record's split.
func TestPoolCreateUndoneWhenTheShardDies(t *testing.T) {
	t.Parallel()
	rs, e := ownShard(t)
	id := "pool-dies-" + testenv.Suffix()
	var once sync.Once
	adminservice.SetFaults(e.App.Admin, func() { once.Do(rs.Kill) }, nil)
	if r := createPool(e, id, 30, 3000); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("create with the shard down: %s", r)
	}
	if row, ok := e.Row(id, 1); !ok || row.Pending == nil || len(parts(t, e, id)) != 30 {
		t.Fatalf("the create should be pending with its 30 parts: %+v (exists %v)", row, ok)
	}
	adminservice.SetFaults(e.App.Admin, nil, nil)
	rs.Start()
	e.Clock.Advance(grace + time.Second)
	if err := e.App.Admin.Repair(context.Background()); err != nil {
		t.Fatalf("repair: %v", err)
	}
	if _, ok := e.Row(id, 1); ok {
		t.Error("the repairer kept the row of a create the shard never took")
	}
	if p := parts(t, e, id); p != nil {
		t.Errorf("the repairer kept the split of a create undone: %d parts", len(p))
	}
	e.Agree(id, 1)

	if r := createPool(e, id, 30, 3000); r.Status != http.StatusCreated {
		t.Fatalf("the same create once the shard is back: %s", r)
	}
	if left, _ := e.Pool(id, 1); len(left) != 30 || len(parts(t, e, id)) != 30 {
		t.Errorf("the pool: %d parts on the shard, %d in the record, want 30", len(left), len(parts(t, e, id)))
	}
	e.Agree(id, 1)
}

// MySQL fails once the shard holds the pool: a repairer in a restarted process
// promotes the create, and the shard's parts are the record's split.
func TestPoolCreateRolledForwardByTheRepairer(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{Service: config()})
	id := "pool-forward-" + testenv.Suffix()
	var once sync.Once
	adminservice.SetFaults(e.App.Admin, nil, func() { once.Do(func() { e.App.Store.Close() }) })
	if r := createPool(e, id, 40, 4000); r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Error().Message, "mysql") {
		t.Fatalf("with MySQL gone after the Redis write: want 503 naming mysql, have %s", r)
	}
	restarted := admintest.Start(t, admintest.Options{DSN: e.DSN, RedisAddrs: e.Addrs, Service: config()})
	restarted.Clock.Advance(grace + time.Second)
	if err := restarted.App.Admin.Repair(context.Background()); err != nil {
		t.Fatalf("repair: %v", err)
	}
	row, ok := restarted.Row(id, 1)
	if !ok || row.Version != 1 || row.Spec.Envelope == nil || row.Spec.Envelope.Amount != 4000 {
		t.Fatalf("after repair: want the pool's create promoted, have %+v (exists %v)", row, ok)
	}
	restarted.Agree(id, 1)
	if left, _ := restarted.Pool(id, 1); len(left) != 40 {
		t.Errorf("the shard holds %d parts, want 40", len(left))
	}
	if h, _ := restarted.Hash(id, 1); h.EnvAmount != 4000 || h.EnvLeft != 4000 || h.State != string(promo.Active) {
		t.Errorf("hash: %+v", h)
	}
}
