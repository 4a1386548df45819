package rebuild_test

// Component tests of the rebuild: the local stack's redis-servers, with the shard
// under test served by a redis-server of the test's own (killed and restarted
// empty; the stack's servers are shared by every test), a throwaway MariaDB
// database, and an in-process Kafka cluster with a flow sink per test.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
	"github.com/flashsale/platform/recovery/internal/flowlag"
	"github.com/flashsale/platform/recovery/internal/flowsink"
	"github.com/flashsale/platform/recovery/internal/rebuild"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
)

const lostShard = 5

type buyer struct {
	rid, pin, ip, key string
	num               int64
}

// sale runs n grab attempts per worker on keys, cancelling every fourth grant; it
// returns the granted (and not cancelled) and the cancelled grabs.
func sale(t *testing.T, s *rt.Sale, keys []string, tag string, workers, n int) (held, returned []buyer) {
	t.Helper()
	grab := func(ctx context.Context, w, i int) (buyer, bool, error) {
		b := buyer{rid: fmt.Sprintf("%s-%d-%d", tag, w, i), pin: fmt.Sprintf("pin-%d", rand.IntN(30)),
			ip: fmt.Sprintf("10.1.0.%d", rand.IntN(12)), key: keys[rand.IntN(len(keys))], num: 1 + int64(rand.IntN(2))}
		ok, _, err := s.Grab(ctx, b.rid, b.pin, b.ip, b.key, b.num)
		if err != nil {
			return b, false, fmt.Errorf("grab %s: %v", b.rid, err)
		}
		return b, ok, nil
	}
	cancel := func(ctx context.Context, b buyer) error {
		if ok, err := s.Cancel(ctx, b.rid, b.pin, b.ip, b.key, b.num, "PAYMENT_EXPIRED"); err != nil || !ok {
			return fmt.Errorf("cancel %s: %v %v", b.rid, ok, err)
		}
		return nil
	}
	return runSale(t, workers, n, grab, cancel)
}

// runSale is a sale's shape, whatever the grab: n attempts per worker, each
// worker concurrent with the others, every fourth grant cancelled. A worker
// stops at its first error (the test fails with it); it returns the grants held
// and the cancelled ones.
func runSale[G any](t *testing.T, workers, n int, grab func(ctx context.Context, w, i int) (G, bool, error),
	cancel func(ctx context.Context, g G) error) (held, returned []G) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := range n {
				g, ok, err := grab(ctx, w, i)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					continue
				}
				if i%4 == 0 {
					if err := cancel(ctx, g); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					returned = append(returned, g)
					mu.Unlock()
					continue
				}
				mu.Lock()
				held = append(held, g)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return held, returned
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func options(shards ...int) rebuild.Options {
	o := rebuild.Defaults()
	o.Shards, o.Settle, o.CatchUp, o.FenceTTL = shards, 50*time.Millisecond, 30*time.Second, 5*time.Second
	return o
}

// world is what a rebuild test runs against: a redis-server of the test's own as
// shard lostShard (the stack's serve the others), a throwaway database, an
// in-process Kafka cluster, a flow sink of its own group, and the rebuild's deps.
type world struct {
	own     *rt.Redis
	shards  []redis.UniversalClient
	brokers []string
	db      *store.Store
	deps    rebuild.Deps
}

// newWorld starts it; sinkRecord, when set, is what the sink writes into instead
// of the database itself.
func newWorld(t *testing.T, group string, sinkRecord func(*store.Flows) flowsink.Record) world {
	t.Helper()
	w := world{own: rt.StartRedis(t), db: rt.OpenStore(t)}
	w.shards = rt.Shards(t, map[int]string{lostShard: w.own.Addr})
	w.brokers = rt.Kafka(t).ListenAddrs()
	var rec flowsink.Record = w.db.Flows
	if sinkRecord != nil {
		rec = sinkRecord(w.db.Flows)
	}
	rt.RunSink(t, w.brokers, group, rec)
	w.deps = rebuild.Deps{Shards: w.shards, Record: w.db.Rebuild, Flows: w.db.Flows, Lag: flowlag.NewMeter(w.brokers, kafkaauth.Auth{}, flow.Topic, group), Log: quiet()}
	return w
}

// A shard's redis-server is SIGKILLed mid-sale and comes back empty. Rebuilt from
// MySQL, every promotion, pin and ip counter and the request ledger equal what they
// were; the sale then goes on to sold out with no oversell.
func TestKilledShardIsRebuiltExactly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, "sink-rebuild", nil)
	own, shards, brokers, db := w.own, w.shards, w.brokers, w.db
	suffix := testenv.Suffix()

	lost := []string{
		rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: rt.IDOnShard("lost-a-"+suffix, lostShard), Total: 400, PerPin: 8, PerIP: 40}),
		rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: rt.IDOnShard("lost-b-"+suffix, lostShard), Total: 60, PerPin: 3}),
		rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: rt.IDOnShard("lost-idle-"+suffix, lostShard), Total: 10}),
	}
	other := rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: rt.IDOnShard("kept-"+suffix, 9), Total: 500})
	s := rt.NewSale(shards, brokers)
	defer s.Close()

	// The sale, on the lost shard and another; then the shard dies under it.
	held, returned := sale(t, s, append(lost[:2:2], other), "one-"+suffix, 4, 60)
	if len(held) == 0 || len(returned) == 0 {
		t.Fatalf("the sale held %d and returned %d; want both > 0", len(held), len(returned))
	}
	before := map[string]rt.Snapshot{}
	for _, key := range lost {
		before[key] = rt.Take(t, shards[lostShard], key)
	}
	// Grabs keep coming while the server dies. They go to a promotion of their own:
	// what it held at the instant of death cannot be read, so it is held to the
	// record (invariant 4) below rather than to a snapshot.
	dying := rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: rt.IDOnShard("lost-dying-"+suffix, lostShard), Total: 1000})
	died := make(chan struct{})
	go func() {
		defer close(died)
		for i := 0; ; i++ {
			if _, _, err := s.Grab(ctx, fmt.Sprintf("dying-%s-%d", suffix, i), "pin-x", "10.9.9.9", dying, 1); err != nil {
				return // the server is gone
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	own.Kill()
	<-died
	own.Start()
	if n := shards[lostShard].DBSize(ctx).Val(); n != 0 {
		t.Fatalf("the restarted server holds %d keys; want it empty", n)
	}

	shardRun := options(lostShard)
	var progress bytes.Buffer
	shardRun.Progress = &progress
	sum, err := rebuild.Run(ctx, w.deps, shardRun)
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if len(sum.Shards) != 1 || sum.Shards[0].Promotions != len(lost)+1 {
		t.Fatalf("summary %+v; want one shard with %d promotions", sum.Shards, len(lost)+1)
	}
	if out := progress.String(); !strings.Contains(out, "4/4") || !strings.Contains(out, " flow rows") {
		t.Errorf("progress %q; want the promotions counted and the flow rows read", out)
	}
	for _, key := range lost {
		after := rt.Take(t, shards[lostShard], key)
		if !reflect.DeepEqual(before[key], after) {
			t.Errorf("%s rebuilt differs:\nbefore %+v\nafter  %+v", key, before[key], after)
		}
	}
	if shards[lostShard].Exists(ctx, promo.BuiltKey(lostShard)).Val() != 1 || shards[lostShard].Exists(ctx, promo.FenceKey(lostShard)).Val() != 0 {
		t.Fatal("after the rebuild the shard must hold its built marker and no fence")
	}

	// Replays answer their first answer: the ledger and its body hashes came back.
	for _, c := range []struct {
		b     buyer
		state string
	}{{held[0], lua.LedgerCommitted}, {returned[0], lua.LedgerReturned}} {
		if ring.Default.Shard(c.b.key) != lostShard {
			continue
		}
		_, code, err := s.Grab(ctx, c.b.rid, c.b.pin, c.b.ip, c.b.key, c.b.num)
		if err != nil || code != lua.CodeDuplicate {
			t.Errorf("replay of %s: code %v err %v; want DUPLICATE", c.b.rid, code, err)
		}
	}

	checkIndexRestored(t, shards[lostShard], append(held, returned...))

	// The sale goes on to sold out: no oversell, and the record agrees.
	sale(t, s, lost[:2], "two-"+suffix, 4, 150)
	if err := w.deps.Lag.WaitCaughtUp(ctx, 30*time.Second, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, key := range append(lost, other, dying) {
		snap := rt.RecordAgrees(t, db.Rebuild, shards[ring.Default.Shard(key)], key)
		if key == lost[1] && snap.Remaining != 0 {
			t.Errorf("%s: remaining %d after the second sale; want sold out", key, snap.Remaining)
		}
	}

	// One promotion rebuilt alone repairs a drift planted by hand, and nothing else.
	key := lost[0]
	want := rt.Take(t, shards[lostShard], key)
	var somePin string
	for p := range want.Pins {
		somePin = p
		break
	}
	shards[lostShard].HIncrBy(ctx, promo.PinsKey(key), somePin, 5)
	shards[lostShard].HSet(ctx, key, "remaining", 1)
	id, typ, _ := promo.ParseKey(key)
	o := options()
	o.Promo = &store.ID{PromoID: id, Type: typ}
	if _, err := rebuild.Run(ctx, w.deps, o); err != nil {
		t.Fatalf("rebuild --promo: %v", err)
	}
	if have := rt.Take(t, shards[lostShard], key); !reflect.DeepEqual(want, have) {
		t.Errorf("%s after rebuild --promo:\nwant %+v\nhave %+v", key, want, have)
	}
}

// checkIndexRestored: every grab of buyers (granted, cancelled or not) whose request
// index entry lives on the rebuilt server has it back, as grab-service's claim wrote
// it and with what is left of its life; no other grab's entry is written there.
func checkIndexRestored(t *testing.T, rebuilt redis.UniversalClient, buyers []buyer) {
	t.Helper()
	ctx := context.Background()
	restored, elsewhere := 0, 0
	for _, b := range buyers {
		key := promo.RequestIndexKey(b.rid)
		raw, err := rebuilt.Get(ctx, key).Result()
		if ring.Default.Shard(key) != lostShard {
			if err == nil {
				t.Errorf("%s: written on shard %d, whose index it is not", key, lostShard)
			}
			elsewhere++
			continue
		}
		id, typ, _ := promo.ParseKey(b.key)
		want := flow.RequestIndex{BodyHash: rt.BodyHash(b.rid, b.pin, b.ip, b.key, b.num), Pin: b.pin, IP: b.ip,
			Items: []flow.Item{{PromoID: id, Type: typ, Num: b.num, Shard: ring.Default.Shard(b.key)}}}
		var have flow.RequestIndex
		if err != nil || json.Unmarshal([]byte(raw), &have) != nil || !reflect.DeepEqual(have, want) {
			t.Errorf("%s after the rebuild: %q (%v); want %+v", key, raw, err, want)
			continue
		}
		if ttl := rebuilt.PTTL(ctx, key).Val(); ttl < flow.RequestIndexTTL-time.Hour || ttl > flow.RequestIndexTTL {
			t.Errorf("%s: lives %s more; want about %s", key, ttl, flow.RequestIndexTTL)
		}
		restored++
	}
	if restored == 0 || elsewhere == 0 {
		t.Errorf("of %d grabs, %d had their index entry on the rebuilt shard and %d elsewhere; want both > 0", len(buyers), restored, elsewhere)
	}
}

// With the flow sink behind (here: not running), a rebuild refuses and lifts its
// fence; --force rebuilds from what MySQL holds.
func TestRebuildRefusesWhileTheSinkIsBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	own := rt.StartRedis(t)
	all := map[int]string{}
	for i := 0; i < ring.Shards; i++ {
		all[i] = own.Addr // one private server for every shard: the markers stay ours
	}
	shards := rt.Shards(t, all)
	kf := rt.Kafka(t)
	brokers := kf.ListenAddrs()
	db := rt.OpenStore(t)
	key := rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: "behind-" + testenv.Suffix(), Total: 10})
	s := rt.NewSale(shards, brokers)
	defer s.Close()
	if ok, _, err := s.Grab(ctx, "behind-1", "p", "1.2.3.4", key, 1); !ok || err != nil {
		t.Fatalf("grab: %v %v", ok, err)
	}
	shard := ring.Default.Shard(key)
	d := rebuild.Deps{Shards: shards, Record: db.Rebuild, Flows: db.Flows, Lag: flowlag.NewMeter(brokers, kafkaauth.Auth{}, flow.Topic, "nobody-consumes"), Log: quiet()}
	o := options(shard)
	o.CatchUp, o.Drain = time.Second, 300*time.Millisecond

	// A take still open (its outcome lives only in Redis) refuses the rebuild too.
	shards[shard].ZAdd(ctx, promo.PendingKey(key), redis.Z{Member: "open-take"})
	if _, err := rebuild.Run(ctx, d, o); !errors.Is(err, rebuild.ErrRefused) || !strings.Contains(err.Error(), "takes still open") {
		t.Fatalf("rebuild over an open take: %v; want a refusal naming it", err)
	}
	shards[shard].ZRem(ctx, promo.PendingKey(key), "open-take")

	if _, err := rebuild.Run(ctx, d, o); !errors.Is(err, rebuild.ErrRefused) {
		t.Fatalf("rebuild with the sink behind: %v; want ErrRefused", err)
	}
	if shards[shard].Exists(ctx, promo.FenceKey(shard)).Val() != 0 {
		t.Fatal("a refused rebuild left its fence up")
	}
	o.Force = true
	if _, err := rebuild.Run(ctx, d, o); err != nil {
		t.Fatalf("forced rebuild: %v", err)
	}
	// MySQL never got the grab, so the forced rebuild restores the promotion untouched.
	if h := rt.Take(t, shards[shard], key); h.Remaining != 10 || len(h.Ledger) != 0 {
		t.Fatalf("forced rebuild: remaining %d, ledger %d; want 10 and 0", h.Remaining, len(h.Ledger))
	}
	// Every shard is whole now, so --missing finds nothing.
	for i := range shards {
		if i != shard {
			shards[i].Set(ctx, promo.BuiltKey(i), "x", 0)
		}
	}
	if left, err := rebuild.Unbuilt(ctx, shards); err != nil || len(left) != 0 {
		t.Fatalf("unbuilt shards %v, %v; want none", left, err)
	}
}

// flowsOnly is the record as a sink that settles no owed CANCELs sees it.
type flowsOnly struct{ db *store.Flows }

func (f flowsOnly) InsertFlows(ctx context.Context, events []flow.Event) (int, error) {
	return f.db.InsertFlows(ctx, events)
}

// A double fault: Kafka's acknowledgement of a GRAB is lost, so grab-service rolls
// the take back and owes its CANCEL, which Kafka refuses too while the GRAB is not in
// MySQL yet; then the shard dies with the debt in its ledger. The GRAB reaches the
// record through the sink; the rebuild settles the owed copy first, so the unit is
// not restored as granted to a buyer who was told it was not.
func TestOwedCancelOfALostShardIsNotRestoredAsAGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The sink settles no owed CANCELs here: the rebuild's settle is what is checked.
	w := newWorld(t, "sink-owed", func(db *store.Flows) flowsink.Record { return flowsOnly{db} })
	own, shards, brokers, db := w.own, w.shards, w.brokers, w.db
	suffix := testenv.Suffix()
	key := rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: rt.IDOnShard("owed-"+suffix, lostShard), Total: 10, PerPin: 5})
	s := rt.NewSale(shards, brokers)
	defer s.Close()

	rid, pin := "owed-"+suffix, "pin-owed"
	if ok, code, err := s.Grab(ctx, rid, pin, "10.3.0.1", key, 2); !ok || err != nil {
		t.Fatalf("grab: %v %v", code, err)
	}
	id, typ, _ := promo.ParseKey(key)
	if err := db.Flows.OweCancels(ctx, []flow.Event{{EventID: "owed-cancel-" + suffix, Kind: flow.Cancel, RequestID: rid, Pin: pin, IP: "10.3.0.1",
		Items: []flow.Item{{PromoID: id, Type: typ, Num: 2, Shard: lostShard}}, OccurredAt: flow.Stamp(time.Now()), Reason: "ROLLBACK"}}); err != nil {
		t.Fatal(err)
	}
	own.Kill()
	own.Start()

	sum, err := rebuild.Run(ctx, w.deps, options(lostShard))
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if sum.OwedSettled != 1 {
		t.Errorf("the rebuild settled %d owed CANCELs; want 1", sum.OwedSettled)
	}
	snap := rt.Take(t, shards[lostShard], key)
	if snap.Remaining != 10 || snap.Pins[pin] != "" || snap.Ledger[rid].State != lua.LedgerAbortRecorded {
		t.Fatalf("rebuilt: remaining %d, pin holds %q, ledger %+v; want 10, nothing and %s", snap.Remaining, snap.Pins[pin], snap.Ledger[rid], lua.LedgerAbortRecorded)
	}
	rt.RecordAgrees(t, db.Rebuild, shards[lostShard], key)
}

// A patch reaches the hash just before the fence and is promoted in MySQL only
// after the rebuild would have read the record: the rebuild waits for it, so the
// rebuilt hash holds the patch, not the older row it replaced.
func TestRebuildWaitsForAnAdminChangeInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, "sink-admin", nil)
	shards, db := w.shards, w.db
	key := rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: rt.IDOnShard("patched-"+testenv.Suffix(), lostShard), Total: 10})
	id, typ, _ := promo.ParseKey(key)
	sid := store.ID{PromoID: id, Type: typ}

	// promo-admin's steps 1 and 2 of a patch of total 10 -> 20; step 3 comes late.
	p, err := db.Promotions.Update(ctx, sid, func(p *store.Promotion) error {
		spec := p.Spec
		spec.Total = 20
		return p.Propose(store.OpPatch, spec, p.State, time.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Pending.Spec
	if r, err := lua.Patch(ctx, shards[lostShard], lostShard, key, lua.AdminSpec{Ver: 2, Total: 20, MaxPerGrab: s.MaxPerGrab,
		StartMs: s.StartAt.UnixMilli(), EndMs: s.EndAt.UnixMilli(), State: "ACTIVE"}, time.Now().UnixMilli()); err != nil || r.Code != lua.AdminOK {
		t.Fatalf("patch: %+v %v", r, err)
	}
	// Step 3 lands once the rebuild says it waits for it: a rebuild that read the
	// record without waiting never says so, and restores the older row.
	waiting, ran := make(chan struct{}), make(chan struct{})
	promoted := make(chan error, 1)
	go func() {
		select {
		case <-waiting:
			_, err := db.Promotions.Promote(ctx, sid, 2, time.Now())
			promoted <- err
		case <-ran:
			promoted <- nil
		}
	}()
	deps := w.deps
	deps.Log = slog.New(&onMessage{msg: "waiting for an admin change in flight to be promoted or discarded", seen: waiting})
	o := options(lostShard)
	o.AdminGrace = 20 * time.Second
	_, err = rebuild.Run(ctx, deps, o)
	close(ran)
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if err := <-promoted; err != nil {
		t.Fatalf("promote: %v", err)
	}
	if h := rt.Take(t, shards[lostShard], key); h.Total != 20 || h.Ver != 2 || h.Remaining != 20 {
		t.Fatalf("rebuilt: total %d, ver %d, remaining %d; want the promoted patch: 20, 2, 20", h.Total, h.Ver, h.Remaining)
	}
}

// onMessage is a log handler that closes seen at the first record with msg.
type onMessage struct {
	msg  string
	seen chan struct{}
	once sync.Once
}

func (h *onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h *onMessage) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *onMessage) WithGroup(string) slog.Handler            { return h }
func (h *onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}

// A rebuilt shard gets back the holds of the grants whose index entries lived on
// it and that the record shows neither confirmed nor returned, each at its own
// deadline (one already due too: the next reconciler pass returns it), and their
// index entries say they were held. A confirmed, a returned and an unheld grant
// get no hold, and lose one the server still had.
func TestRebuildRestoresOpenHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, "sink-holds", nil)
	suffix := testenv.Suffix()
	key := rt.Create(t, w.db.Promotions, w.shards, rt.Spec{PromoID: rt.IDOnShard("holds-"+suffix, lostShard), Total: 100})
	id, typ, _ := promo.ParseKey(key)
	s := rt.NewSale(w.shards, w.brokers)
	defer s.Close()
	ridOnLostShard := func(name string) string {
		for i := 0; ; i++ {
			if rid := fmt.Sprintf("%s-%s-%d", name, suffix, i); ring.Default.Shard(promo.RequestIndexKey(rid)) == lostShard {
				return rid
			}
		}
	}
	now := time.Now()
	until := map[string]int64{
		"open": now.Add(time.Hour).UnixMilli(), "due": now.Add(-time.Minute).UnixMilli(),
		"paid": now.Add(time.Hour).UnixMilli(), "gone": now.Add(time.Hour).UnixMilli(), "plain": 0,
	}
	rids := map[string]string{}
	var events []flow.Event
	event := func(kind flow.Kind, name string) flow.Event {
		return flow.Event{EventID: string(kind) + "-" + rids[name], Kind: kind, RequestID: rids[name], Pin: "pin-" + name, IP: "10.7.0.1",
			Items: []flow.Item{{PromoID: id, Type: typ, Num: 1, Shard: lostShard}}, OccurredAt: flow.Stamp(now)}
	}
	for name, u := range until {
		rids[name] = ridOnLostShard(name)
		grab := event(flow.Grab, name)
		grab.HoldUntil = u
		if u != 0 && u < now.UnixMilli() { // granted long enough ago for its hold to be due
			grab.OccurredAt = flow.Stamp(time.UnixMilli(u).Add(-time.Minute))
		}
		events = append(events, grab)
	}
	cancel := event(flow.Cancel, "gone")
	cancel.Reason = "USER_CANCELLED"
	events = append(events, event(flow.Confirm, "paid"), cancel)
	if err := s.Publish(ctx, events...); err != nil {
		t.Fatal(err)
	}
	if err := w.deps.Lag.WaitCaughtUp(ctx, 30*time.Second, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	w.own.Kill()
	w.own.Start()
	// As on a promoted replica that lagged: the hold of a grant confirmed since, one
	// aside for a confirm, and one of a grant returned since.
	w.shards[lostShard].ZAdd(ctx, promo.HoldsKey, redis.Z{Score: float64(until["paid"]), Member: rids["paid"]}, redis.Z{Score: float64(until["gone"]), Member: rids["gone"]})
	w.shards[lostShard].ZAdd(ctx, promo.ConfirmingKey(promo.HoldsKey), redis.Z{Score: float64(until["paid"]), Member: rids["paid"]})

	sum, err := rebuild.Run(ctx, w.deps, options(lostShard))
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if n := w.shards[lostShard].ZCard(ctx, promo.ConfirmingKey(promo.HoldsKey)).Val(); n != 0 {
		t.Errorf("%d holds left aside for a confirm the record has", n)
	}
	holds, err := w.shards[lostShard].ZRangeWithScores(ctx, promo.HoldsKey, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]int64{}
	for _, z := range holds {
		have[z.Member.(string)] = int64(z.Score)
	}
	want := map[string]int64{rids["open"]: until["open"], rids["due"]: until["due"]}
	if !reflect.DeepEqual(have, want) || sum.Shards[0].Holds != 2 {
		t.Fatalf("holds after the rebuild %v (summary %d); want %v", have, sum.Shards[0].Holds, want)
	}
	for _, name := range []string{"open", "plain"} {
		var idx flow.RequestIndex
		raw, err := w.shards[lostShard].Get(ctx, promo.RequestIndexKey(rids[name])).Result()
		if err != nil || json.Unmarshal([]byte(raw), &idx) != nil || idx.HoldUntilMs != until[name] {
			t.Errorf("index entry of %s: %q (%v); want its hold's deadline %d", name, raw, err, until[name])
		}
	}
	// A rebuild of a shard whose holds are there leaves them as they are.
	w.shards[lostShard].ZAdd(ctx, promo.HoldsKey, redis.Z{Score: 1, Member: rids["open"]})
	if _, err := rebuild.Run(ctx, w.deps, options(lostShard)); err != nil {
		t.Fatalf("second rebuild: %v", err)
	}
	if ms := w.shards[lostShard].ZScore(ctx, promo.HoldsKey, rids["open"]).Val(); ms != 1 {
		t.Errorf("a hold already there was rewritten to %v", ms)
	}
}
