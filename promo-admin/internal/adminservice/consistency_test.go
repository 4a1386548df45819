package adminservice_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// The MySQL row and the Redis hash agree after a failure at any point of a change.

const grace = 10 * time.Second

// config bounds each Redis call by 5 s: a shard these tests kill refuses at once,
// so the bound only decides how long a loaded machine may take to answer (half a
// second failed healthy calls there), and the grace still well exceeds it.
func config() adminservice.Config {
	return adminservice.Config{RedisTimeout: 5 * time.Second, RepairGrace: grace, RepairEvery: 50 * time.Millisecond}
}

// change is one admin request on promotion id (type 1).
type change struct {
	name    string
	method  string
	path    func(id string) string
	body    func(e *admintest.Env, id string) any
	ok      int
	existed bool // the promotion exists before the change
	// version the row holds once the change is done
	version int64
}

func changes() []change {
	p := func(suffix string) func(string) string {
		return func(id string) string { return "/v1/promotions/" + id + "/1" + suffix }
	}
	none := func(*admintest.Env, string) any { return nil }
	return []change{
		{"create", http.MethodPost, func(string) string { return "/v1/promotions" },
			func(e *admintest.Env, id string) any { return e.Spec(id) }, http.StatusCreated, false, 1},
		{"patch", http.MethodPatch, p(""), func(e *admintest.Env, _ string) any {
			return map[string]any{"total": 40, "perPinLimit": 1, "rateLimit": map[string]any{"limit": 9, "windowSeconds": 5},
				"endAt": e.Clock.Now().Add(72 * time.Hour).Format(time.RFC3339)}
		}, http.StatusOK, true, 2},
		{"stop", http.MethodPost, p("/stop"), none, http.StatusOK, true, 2},
		{"delete", http.MethodDelete, p(""), none, http.StatusNoContent, true, 2},
	}
}

func shardOf(id string) int { return ring.Default.Shard(promo.Key(id, 1)) }

// send makes the change's request on promotion id.
func (c change) send(e *admintest.Env, id string) admintest.Response {
	return e.Do(c.method, c.path(id), admintest.AdminToken, c.body(e, id))
}

// succeeds sends the change again and fails the test unless it is applied and the
// row and the hash agree.
func (c change) succeeds(t *testing.T, e *admintest.Env, id, when string) {
	t.Helper()
	if r := c.send(e, id); r.Status != c.ok {
		t.Fatalf("the same request %s: want %d, have %s", when, c.ok, r)
	}
	e.Agree(id, 1)
}

// ownShard starts a service whose 16 shards are one redis-server of the test's own,
// which the test may kill, pause or fence without touching the shared stack.
func ownShard(t *testing.T) (*admintest.RedisServer, *admintest.Env) {
	rs := admintest.StartRedis(t)
	return rs, admintest.Start(t, admintest.Options{RedisAddrs: rs.Addrs(), Service: config()})
}

// The shard dies after the change is recorded as pending and before it reaches
// Redis: 503 naming the shard; once the shard is back and the repairer has run,
// row and hash agree, and the same request then succeeds.
func TestShardDiesBetweenTheWrites(t *testing.T) {
	t.Parallel()
	for _, c := range changes() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			shardDiesBetweenTheWrites(t, c)
		})
	}
}

func shardDiesBetweenTheWrites(t *testing.T, c change) {
	rs, e := ownShard(t)
	id := c.name + "-" + testenv.Suffix()
	if c.existed {
		e.Create(id)
	}
	before, _ := e.Row(id, 1)
	var once sync.Once
	adminservice.SetFaults(e.App.Admin, func() { once.Do(rs.Kill) }, nil)

	proposed := e.Clock.Now() // the steps until the grace is passed on purpose run at this time, however slow the machine
	r := c.send(e, id)
	want := fmt.Sprintf("redis shard %d", shardOf(id))
	if r.Status != http.StatusServiceUnavailable || r.Error().Code != "UNAVAILABLE" || !strings.Contains(r.Error().Message, want) {
		t.Fatalf("with the shard down: want 503 UNAVAILABLE naming %q, have %s", want, r)
	}
	row, ok := e.Row(id, 1)
	if !ok || row.Pending == nil || row.Pending.Version != before.Version+1 || row.Version != before.Version {
		t.Fatalf("the change should be pending at version %d over the committed %d: %+v (exists %v)", before.Version+1, before.Version, row, ok)
	}
	// While it is young, the pending change belongs to its request: BUSY.
	e.Clock.Rewind(proposed)
	if r := c.send(e, id); r.Status != http.StatusConflict || r.Error().Code != "BUSY" {
		t.Errorf("a second change while the first is pending: want 409 BUSY, have %s", r)
	}

	if c.existed {
		if r := e.Do(http.MethodGet, "/v1/promotions/"+id+"/1", admintest.ViewerToken, nil); r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Error().Message, want) {
			t.Errorf("get with the shard down: want 503 naming %q, have %s", want, r)
		}
	}
	repairOnceTheShardAnswers(t, e, rs, id, want, proposed)
	if row, ok := e.Row(id, 1); ok != c.existed || row.Version != before.Version {
		t.Errorf("after repair: want the change undone (version %d, exists %v), have version %d, exists %v", before.Version, c.existed, row.Version, ok)
	}

	adminservice.SetFaults(e.App.Admin, nil, nil)
	c.succeeds(t, e, id, "once the shard is back")
	if row, _ := e.Row(id, 1); row.Version != c.version {
		t.Errorf("after the retry: want version %d, have %d", c.version, row.Version)
	}
}

// repairOnceTheShardAnswers runs the repairer on the change of id proposed at
// proposed, whose shard (named want) is down: it is left pending within the grace
// and while the shard is down, and resolved once the shard is back.
func repairOnceTheShardAnswers(t *testing.T, e *admintest.Env, rs *admintest.RedisServer, id, want string, proposed time.Time) {
	t.Helper()
	e.Clock.Rewind(proposed)
	if err := e.App.Admin.Repair(context.Background()); err != nil {
		t.Fatalf("repair within the grace: %v", err)
	}
	if row, _ := e.Row(id, 1); row.Pending == nil {
		t.Fatal("the repairer resolved a change younger than the grace")
	}
	e.Clock.Advance(grace + time.Second)
	if err := e.App.Admin.Repair(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("repair with the shard down: want an error naming %q, have %v", want, err)
	}
	if row, _ := e.Row(id, 1); row.Pending == nil {
		t.Fatal("the repairer resolved a change without hearing from its shard")
	}

	rs.Start()
	if err := e.App.Admin.Repair(context.Background()); err != nil {
		t.Fatalf("repair: %v", err)
	}
	e.Agree(id, 1)
}

// MySQL fails after the hash took the change and before the row is promoted:
// 503 naming mysql; a repairer (here in a restarted process) rolls the record forward.
func TestRecordFailsAfterTheRedisWrite(t *testing.T) {
	t.Parallel()
	for _, c := range changes() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := admintest.Start(t, admintest.Options{Service: config()})
			id := c.name + "-" + testenv.Suffix()
			if c.existed {
				e.Create(id)
			}
			var once sync.Once
			adminservice.SetFaults(e.App.Admin, nil, func() { once.Do(func() { e.App.Store.Close() }) })
			r := c.send(e, id)
			if r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Error().Message, "mysql") {
				t.Fatalf("with MySQL gone after the Redis write: want 503 naming mysql, have %s", r)
			}

			restarted := admintest.Start(t, admintest.Options{DSN: e.DSN, RedisAddrs: e.Addrs, Service: config()})
			if row, _ := restarted.Row(id, 1); row.Pending == nil || row.Version != c.version-1 {
				t.Fatalf("the change should still be pending over version %d: %+v", c.version-1, row)
			}
			restarted.Clock.Advance(grace + time.Second)
			if err := restarted.App.Admin.Repair(context.Background()); err != nil {
				t.Fatalf("repair: %v", err)
			}
			restarted.Agree(id, 1)
			row, ok := restarted.Row(id, 1)
			if !ok || row.Version != c.version || row.Pending != nil {
				t.Errorf("after repair: want version %d promoted, have %+v (exists %v)", c.version, row, ok)
			}
			if c.name == "delete" && row.State != promo.Deleted {
				t.Errorf("after repair of a delete: state %s", row.State)
			}
		})
	}
}

// The script call times out while the shard still answers reads: the change is
// undone at once (no repairer needed) and the answer is 503 naming the shard.
func TestScriptTimesOutWhileTheShardAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range changes() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rs := admintest.StartRedis(t)
			cfg := config()
			// The script call must time out within the pause, and the reads that undo
			// the change must not: each has 2 s, the pause lasts until the test ends it.
			cfg.RedisTimeout = 2 * time.Second
			e := admintest.Start(t, admintest.Options{RedisAddrs: rs.Addrs(), Service: cfg})
			id := c.name + "-" + testenv.Suffix()
			if c.existed {
				e.Create(id)
			}
			before, _ := e.Row(id, 1)
			ctl := redis.NewClient(&redis.Options{Addr: rs.Addr})
			defer ctl.Close()
			// Writes (scripts included) wait; reads go on.
			adminservice.SetFaults(e.App.Admin, func() {
				if err := ctl.Do(context.Background(), "CLIENT", "PAUSE", 60_000, "WRITE").Err(); err != nil {
					t.Errorf("client pause: %v", err)
				}
			}, nil)
			r := c.send(e, id)
			want := fmt.Sprintf("redis shard %d", shardOf(id))
			if r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Error().Message, want) {
				t.Fatalf("script timed out: want 503 naming %q, have %s", want, r)
			}
			row, ok := e.Row(id, 1)
			if ok != c.existed || row.Pending != nil || row.Version != before.Version {
				t.Fatalf("the change should be undone at once: %+v (exists %v)", row, ok)
			}
			adminservice.SetFaults(e.App.Admin, nil, nil)
			if err := ctl.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond) // the timed-out call must not land late
			e.Agree(id, 1)
			c.succeeds(t, e, id, "afterwards")
		})
	}
}

// A change left pending by a dead request is taken over by the next request once
// the grace has passed, and by the background repairer, which also runs at start.
func TestAbandonedChangesAreResolved(t *testing.T) {
	t.Parallel()
	rs, e := ownShard(t)
	a, b := "takeover-"+testenv.Suffix(), "repairer-"+testenv.Suffix()
	e.Create(a)
	e.Create(b)
	abandon(t, e, rs, "patch", http.MethodPatch, "/v1/promotions/"+a+"/1", map[string]any{"total": 7})
	abandon(t, e, rs, "stop", http.MethodPost, "/v1/promotions/"+b+"/1/stop", nil)
	c := "create-" + testenv.Suffix()
	abandon(t, e, rs, "create", http.MethodPost, "/v1/promotions", e.Spec(c))
	e.Clock.Advance(grace + time.Second)

	// A create over an abandoned create resolves it, then creates.
	if r := e.Do(http.MethodPost, "/v1/promotions", admintest.AdminToken, e.Spec(c)); r.Status != http.StatusCreated {
		t.Errorf("create over an abandoned create: %s", r)
	}
	e.Agree(c, 1)

	// The next request on a resolves the abandoned patch itself, then applies its own.
	r := e.Do(http.MethodPatch, "/v1/promotions/"+a+"/1", admintest.AdminToken, map[string]any{"total": 8})
	if r.Status != http.StatusOK || r.Promotion().Total != 8 {
		t.Errorf("patch over an abandoned change: %s", r)
	}
	e.Agree(a, 1)

	// The repairer resolves b on its first run, at start.
	runRepairerUntilResolved(t, e, b)
	e.Agree(b, 1)
	if row, _ := e.Row(b, 1); row.State != promo.Active || row.Version != 1 {
		t.Errorf("the abandoned stop should be undone: %+v", row)
	}
}

// abandon sends a change (what) that the shard's death leaves pending, as a
// request that dies would, and starts the shard again.
func abandon(t *testing.T, e *admintest.Env, rs *admintest.RedisServer, what, method, path string, body any) {
	t.Helper()
	var once sync.Once
	adminservice.SetFaults(e.App.Admin, func() { once.Do(rs.Kill) }, nil)
	if r := e.Do(method, path, admintest.AdminToken, body); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("%s with the shard down: %s", what, r)
	}
	adminservice.SetFaults(e.App.Admin, nil, nil)
	rs.Start()
}

// runRepairerUntilResolved runs the background repairer until the pending change
// of id is resolved.
func runRepairerUntilResolved(t *testing.T, e *admintest.Env, id string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.App.Admin.RunRepairer(ctx) }()
	deadline := time.Now().Add(30 * time.Second) // a bound on a wait, not a speed
	for {
		if row, _ := e.Row(id, 1); row.Pending == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the repairer did not resolve the abandoned stop")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("repairer: %v", err)
	}
}

// Concurrent changes of one promotion: each is applied whole or refused as BUSY,
// and the row and the hash end in agreement on the last one applied.
func TestConcurrentChangesOfOnePromotion(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{Service: config()})
	id := "race-" + testenv.Suffix()
	e.Create(id)
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.Do(http.MethodPatch, "/v1/promotions/"+id+"/1", admintest.AdminToken, map[string]any{"total": 200 + i})
			statuses[i] = r.Status
			if r.Status != http.StatusOK && !(r.Status == http.StatusConflict && r.Error().Code == "BUSY") {
				t.Errorf("patch %d: want 200 or 409 BUSY, have %s", i, r)
			}
		}()
	}
	wg.Wait()
	applied := 0
	for _, s := range statuses {
		if s == http.StatusOK {
			applied++
		}
	}
	row, _ := e.Row(id, 1)
	if applied == 0 || row.Version != int64(1+applied) {
		t.Errorf("%d patches answered 200 but the row is at version %d", applied, row.Version)
	}
	e.Agree(id, 1)
}

// A rebuild fences the shard (bin/recovery rebuild): every change of its promotions
// answers 503 saying so and changes nothing, in the record or in Redis, since the
// rebuild would overwrite the hash with the record it read before the change. Once
// the fence is lifted the same request succeeds.
func TestChangesWaitForARebuild(t *testing.T) {
	t.Parallel()
	for _, c := range changes() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, e := ownShard(t)
			id := c.name + "-" + testenv.Suffix()
			if c.existed {
				e.Create(id)
			}
			ref := store.ID{PromoID: id, Type: 1}
			before := e.Snapshot(ref)
			shard := e.Shard(shardOf(id))
			shard.Set(context.Background(), promo.FenceKey(shardOf(id)), "rebuild", 0)

			r := c.send(e, id)
			if r.Status != http.StatusServiceUnavailable || r.Error().Code != "UNAVAILABLE" || !strings.Contains(r.Error().Message, "being rebuilt") {
				t.Fatalf("while the shard is rebuilt: want 503 UNAVAILABLE saying it is being rebuilt, have %s", r)
			}
			if after := e.Snapshot(ref); after != before {
				t.Fatalf("a refused change changed something:\nbefore %s\nafter  %s", before, after)
			}

			shard.Del(context.Background(), promo.FenceKey(shardOf(id)))
			c.succeeds(t, e, id, "once the rebuild is done")
		})
	}
}

// A change left pending before a rebuild fenced its shard waits for the fence: the
// repairer must not resolve it against a hash the rebuild is about to replace. Once
// the fence is lifted it is resolved against the rebuilt hash.
func TestRepairerWaitsForARebuild(t *testing.T) {
	t.Parallel()
	rs, e := ownShard(t)
	id := "fenced-repair-" + testenv.Suffix()
	e.Create(id)
	var once sync.Once
	adminservice.SetFaults(e.App.Admin, func() { once.Do(rs.Kill) }, nil)
	if r := e.Do(http.MethodPatch, "/v1/promotions/"+id+"/1", admintest.AdminToken, map[string]any{"total": 7}); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("patch with the shard down: %s", r)
	}
	adminservice.SetFaults(e.App.Admin, nil, nil)
	rs.Start()
	fence := promo.FenceKey(shardOf(id))
	e.Shard(shardOf(id)).Set(context.Background(), fence, "rebuild", 0)
	e.Clock.Advance(grace + time.Second)

	if err := e.App.Admin.Repair(context.Background()); err == nil || !strings.Contains(err.Error(), "being rebuilt") {
		t.Errorf("repair while the shard is fenced: want an error saying it is being rebuilt, have %v", err)
	}
	if row, _ := e.Row(id, 1); row.Pending == nil {
		t.Fatal("the repairer resolved a change while its shard was fenced")
	}
	e.Shard(shardOf(id)).Del(context.Background(), fence)
	if err := e.App.Admin.Repair(context.Background()); err != nil {
		t.Fatalf("repair after the fence is lifted: %v", err)
	}
	e.Agree(id, 1)
	if row, _ := e.Row(id, 1); row.Version != 1 || row.Spec.Total == 7 {
		t.Errorf("the patch that never reached the hash should be undone: %+v", row)
	}
}
