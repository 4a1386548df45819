package grab

// The fence against a redis-server of the test's own (every shard on it): the
// markers it reads would fence the local stack's running grab-service if they were
// set on the shared servers.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardmark"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

// pollWithin bounds a test's fence poll: it guards against a hang, as a poll cut
// short decides nothing and leaves a shard fenced; every shard polled here answers.
const pollWithin = 30 * time.Second

// privateShards starts a redis-server of the test's own and returns it as every
// logical shard, so a test may set markers or lose data without touching the stack.
func privateShards(t *testing.T) (*redis.Client, []redis.UniversalClient) {
	c := testenv.StartRedis(t, testenv.Volatile).Client()
	return c, testenv.OneServer(c)
}

// builtShardsWithPromotion starts a redis-server of the test's own as every shard,
// creates a live promotion of 5 units on shard, marks every shard built and returns
// a fence that has read them (following gen, when given, as the pool's generations).
func builtShardsWithPromotion(t *testing.T, shard int, gen func(int) uint64) (*redis.Client, []redis.UniversalClient, string, string, *Fence) {
	t.Helper()
	ctx := context.Background()
	c, shards := privateShards(t)
	id := idOnShard(shard)
	key := promo.Key(id, 1)
	now := time.Now()
	if code, err := lua.Create(ctx, c, shard, key, lua.AdminSpec{Ver: 1, Total: 5, MaxPerGrab: 1, RateWindowMs: 1000,
		StartMs: now.Add(-time.Minute).UnixMilli(), EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE"}); err != nil || code != lua.AdminOK {
		t.Fatalf("create: %v %v", code, err)
	}
	f := NewFence(shards, func(context.Context) ([]string, error) { return []string{key}, nil },
		prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for s := 0; s < ring.Shards; s++ {
		c.Set(ctx, promo.BuiltKey(s), "built", 0)
	}
	if gen != nil {
		f.FollowGenerations(gen)
	}
	f.Poll(ctx, pollWithin)
	return c, shards, id, key, f
}

// idOnShard is a promotion id whose key (type 1) lives on shard.
func idOnShard(shard int) string {
	for n := 0; ; n++ {
		if id := "fence-" + strconv.Itoa(n); ring.Default.Shard(promo.Key(id, 1)) == shard {
			return id
		}
	}
}

func TestFenceFollowsTheMarkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, shards := privateShards(t)
	const lost = 3
	id := idOnShard(lost)
	recorded := []string{promo.Key(id, 1)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := NewFence(shards, func(context.Context) ([]string, error) { return recorded, nil }, prometheus.NewRegistry(), log)

	// A server without markers: the shard the record has a promotion on is fenced;
	// every other shard had nothing to lose and is marked built.
	f.Poll(ctx, pollWithin)
	for s := 0; s < ring.Shards; s++ {
		if have, want := f.Fenced(s), s == lost; have != want {
			t.Fatalf("shard %d fenced %v, want %v", s, have, want)
		}
		if s != lost && c.Exists(ctx, promo.BuiltKey(s)).Val() != 1 {
			t.Fatalf("shard %d: no built marker written", s)
		}
	}
	c.Set(ctx, promo.BuiltKey(lost), "rebuilt", 0)
	f.Poll(ctx, pollWithin)
	if f.Fenced(lost) {
		t.Fatal("a built shard stays fenced")
	}
	c.Set(ctx, promo.FenceKey(lost), "rebuild", time.Minute)
	f.Poll(ctx, pollWithin)
	if !f.Fenced(lost) {
		t.Fatal("the fence marker did not fence")
	}

	// Grabs and buyers' cancels on the fenced shard answer UNAVAILABLE.
	svc, err := New(Defaults(), Deps{Shards: shards, Switches: configcenter.NewHolder(), Metrics: NewMetrics(prometheus.NewRegistry()), Logger: log, Fence: f})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	other := idOnShard(lost + 1)
	res, err := svc.Grab(ctx, Request{RequestID: "r1", Pin: "p", IP: "1.1.1.1", Items: []Item{{PromoID: other, Type: 1, Num: 1}, {PromoID: id, Type: 1, Num: 1}}})
	if err != nil || res.Result != Unavailable || res.FailedItem == nil || *res.FailedItem != 1 {
		t.Fatalf("grab on a fenced shard: %+v %v; want UNAVAILABLE, failedItem 1", res, err)
	}
	idx, _ := json.Marshal(flow.RequestIndex{Pin: "p", IP: "1.1.1.1", Items: []flow.Item{{PromoID: id, Type: 1, Num: 1, Shard: lost}}})
	c.Set(ctx, promo.RequestIndexKey("r0"), idx, time.Minute)
	res, err = svc.Cancel(ctx, "r0", "p", "USER_CANCELLED")
	if err != nil || res.Result != Unavailable {
		t.Fatalf("cancel on a fenced shard: %+v %v; want UNAVAILABLE", res, err)
	}

	// /readyz names the fenced shard (grabtransport.Readyz shows this list).
	if st := f.Status(); len(st) != 1 || st[0].Shard != lost {
		t.Fatalf("fence status: %+v; want shard %d alone", st, lost)
	}

	c.Del(ctx, promo.FenceKey(lost))
	f.Poll(ctx, pollWithin)
	if f.Fenced(lost) {
		t.Fatal("the fence did not lift")
	}
	var nilFence *Fence
	if nilFence.Fenced(lost) || len(nilFence.Status()) != 0 {
		t.Fatal("a nil fence fences nothing")
	}
}

// After a failover the shard's clients reach a promoted replica, which holds the
// built markers its master wrote (replicated) but may lack the master's last
// acknowledged takes: every shard whose marker names the old master is fenced,
// with the reason, until a rebuild writes a marker of the new server's own.
func TestFenceFencesAPromotedReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master := testenv.StartRedis(t, testenv.Volatile)
	replica := testenv.StartRedis(t, testenv.Volatile)
	m, r := master.Client(), replica.Client()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	none := func(context.Context) ([]string, error) { return nil, nil }
	var onEvery []string // the record holds a promotion of every shard
	for s := range ring.Shards {
		onEvery = append(onEvery, promo.Key(idOnShard(s), 1))
	}
	every := func(context.Context) ([]string, error) { return onEvery, nil }

	f := NewFence(testenv.OneServer(m), none, prometheus.NewRegistry(), log)
	f.Poll(ctx, pollWithin) // an empty record: the fence marks every shard built on the master
	replica.FailOverFrom(master)

	f = NewFence(testenv.OneServer(r), every, prometheus.NewRegistry(), log)
	f.Poll(ctx, pollWithin)
	for s := range ring.Shards {
		if !f.Fenced(s) {
			t.Fatalf("shard %d on the promoted replica is open", s)
		}
	}
	if why := f.Status()[0].Why; !strings.Contains(why, "promoted") {
		t.Fatalf("the reason does not say why: %q", why)
	}
	// The rebuild's marker (recovery/internal/rebuild) names the new server.
	if err := shardmark.MarkBuilt(ctx, r, 2, "bin/recovery rebuild", 0, false); err != nil {
		t.Fatal(err)
	}
	f.Poll(ctx, pollWithin)
	if f.Fenced(2) || !f.Fenced(3) {
		t.Fatalf("after shard 2's rebuild: shard 2 fenced %v (want open), shard 3 fenced %v (want fenced)", f.Fenced(2), f.Fenced(3))
	}
	// A shard of which the record holds nothing had nothing to lose: its marker is
	// written anew for this server and the shard opens, as a lost one does.
	f = NewFence(testenv.OneServer(r), none, prometheus.NewRegistry(), log)
	f.Poll(ctx, pollWithin)
	if st, err := shardmark.Read(ctx, r, 3); f.Fenced(3) || err != nil || st.Built != shardmark.Whole {
		t.Fatalf("a promoted shard the record holds nothing of: fenced %v, markers %+v (%v); want open and marked for this server", f.Fenced(3), st, err)
	}
}

// moveDuringTakes bumps gen as the first script call on key goes out (a grab's
// take), once: the shard's client moving to another server while the take is in
// flight.
type moveDuringTakes struct {
	key   string
	gen   *atomic.Uint64
	moved atomic.Bool
}

func (h *moveDuringTakes) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *moveDuringTakes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *moveDuringTakes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if a := c.Args(); c.Name() == "evalsha" && len(a) > 3 && a[3] == h.key && !h.moved.Load() {
				h.moved.Store(true)
				h.gen.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// A failover moves a shard's client to a promoted replica: a take sent after the
// move runs on a server no one has judged whole, which may still hold stock (or
// envelopes) the record has granted. The grab whose take was in flight across the
// move is undone and answered UNAVAILABLE, nothing published; the shard is fenced
// from the move until the fence has read the new server.
func TestAGrabWhoseShardMovesDuringItsTakeIsUndone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const shard = 9
	var gen atomic.Uint64
	c, shards, id, key, f := builtShardsWithPromotion(t, shard, func(int) uint64 { return gen.Load() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	hook := &moveDuringTakes{key: key, gen: &gen}
	c.AddHook(hook)
	pub := &grabtest.Publisher{}
	svc, err := New(Defaults(), Deps{Shards: shards, Publisher: pub, Switches: configcenter.NewHolder(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: log, Fence: f})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	res, err := svc.Grab(ctx, Request{RequestID: "moved-1", Pin: "p", IP: "1.1.1.1", Items: []Item{{PromoID: id, Type: 1, Num: 1}}})
	if err != nil || res.Result != Unavailable || !strings.Contains(res.Message, "moved") || !hook.moved.Load() {
		t.Fatalf("a grab across a move: %+v %v; want UNAVAILABLE, shard moved", res, err)
	}
	if h, _, _ := lua.ReadHash(ctx, c, key); h.Remaining != 5 || len(pub.Events()) != 0 {
		t.Fatalf("after the grab across a move: remaining %d, %d events published; want 5 and none", h.Remaining, len(pub.Events()))
	}
	if _, found, _ := lua.ReadLedger(ctx, c, key, "moved-1"); found {
		t.Fatal("the take across the move left its ledger entry")
	}
	// Until the fence reads the new server, the shard is fenced; then it sells.
	if !f.Fenced(shard) {
		t.Fatal("a moved shard is open before its new server was read")
	}
	f.Poll(ctx, pollWithin)
	res, err = svc.Grab(ctx, Request{RequestID: "moved-1", Pin: "p", IP: "1.1.1.1", Items: []Item{{PromoID: id, Type: 1, Num: 1}}})
	if err != nil || res.Result != Granted {
		t.Fatalf("the retry once the new server is judged: %+v %v; want GRANTED", res, err)
	}
}
