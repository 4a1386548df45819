package rebuild_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
	"github.com/flashsale/platform/recovery/internal/flowlag"
	"github.com/flashsale/platform/recovery/internal/rebuild"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
	"github.com/flashsale/platform/recovery/internal/verify"
)

// bucketSale runs n grab attempts per worker on the bucketed promotions keys (of
// ks buckets), taking parts as the product does, and cancels every fourth grant.
func bucketSale(t *testing.T, s *rt.Sale, keys []string, ks []int, tag string, workers, n int) (held, returned []rt.Bucketed) {
	t.Helper()
	grab := func(ctx context.Context, w, i int) (rt.Bucketed, bool, error) {
		j := rand.IntN(len(keys))
		g, ok, _, err := s.GrabBucketed(ctx, fmt.Sprintf("%s-%d-%d", tag, w, i), fmt.Sprintf("pin-%d", rand.IntN(40)),
			fmt.Sprintf("10.4.0.%d", rand.IntN(12)), keys[j], ks[j], 1+int64(rand.IntN(2)))
		if err != nil {
			return g, false, fmt.Errorf("grab %s: %v", g.RID, err)
		}
		return g, ok, nil
	}
	cancel := func(ctx context.Context, g rt.Bucketed) error {
		if err := s.CancelBucketed(ctx, g, "PAYMENT_EXPIRED"); err != nil {
			return fmt.Errorf("cancel %s: %v", g.RID, err)
		}
		return nil
	}
	return runSale(t, workers, n, grab, cancel)
}

// snapshots reads every bucket of the promotions, by bucket key.
func snapshots(t *testing.T, shards []redis.UniversalClient, keys []string, ks []int) map[string]rt.Snapshot {
	t.Helper()
	out := map[string]rt.Snapshot{}
	for i, key := range keys {
		l := bucket.LayoutOf(ring.Default, key, ks[i])
		for b, bk := range l.Keys {
			out[bk] = rt.Take(t, shards[l.Shards[b]], bk)
		}
	}
	return out
}

// A shard holding a bucket of two bucketed promotions (bucket 2 of 4, and bucket
// 0, the promotion key, of 8) dies after a sale whose grabs took parts on several
// buckets, fell over to donors and were partly cancelled. Rebuilt from MySQL, each
// of its buckets' hash, pins, ips and ledger equal what they were; the other
// buckets' shards are not touched; the sale goes on; verify finds no drift, then
// the one planted by hand, named by its bucket key.
func TestKilledShardBucketsAreRebuiltExactly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, "sink-buckets", nil)
	shards, db := w.shards, w.db
	suffix := testenv.Suffix()
	keys := []string{
		rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: rt.IDWithBucketOn("hot-"+suffix, 4, 2, lostShard), Total: 90, PerPin: 6, PerIP: 30, RateLimit: 10_001, Buckets: 4}),
		rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: rt.IDWithBucketOn("wide-"+suffix, 8, 0, lostShard), Total: 1000, PerPin: 10, Buckets: 8}),
	}
	ks := []int{4, 8}
	lost := []string{bucket.Keys(ring.Default, keys[0], 4)[2], keys[1]}
	s := rt.NewSale(shards, w.brokers)
	defer s.Close()

	held, returned := bucketSale(t, s, keys, ks, "one-"+suffix, 4, 60)
	if len(held) == 0 || len(returned) == 0 {
		t.Fatalf("the sale held %d and returned %d; want both > 0", len(held), len(returned))
	}
	donors, parted := 0, 0
	for _, g := range append(held, returned...) {
		if g.Stock != bucket.Home(g.Pin, g.K) {
			donors++
		}
		if len(bucket.LayoutOf(ring.Default, g.Key, g.K).Parts(g.Stock, g.Pin, g.IP, g.NoIP)) > 1 {
			parted++
		}
	}
	if donors == 0 || parted == 0 {
		t.Fatalf("of %d grants, %d took from a donor and %d had several parts; want both > 0", len(held)+len(returned), donors, parted)
	}
	before := snapshots(t, shards, keys, ks)
	if h := before[lost[0]]; h.Buckets != "4" || h.RateLimit != 2501 || h.Total != 22 {
		t.Fatalf("%s as created: buckets %q, rate limit %d, total %d; want 4, 2501, 22", lost[0], h.Buckets, h.RateLimit, h.Total)
	}
	parts := 0
	for _, key := range lost {
		for _, e := range before[key].Ledger {
			if e.Part != "" {
				parts++
			}
		}
	}
	if parts == 0 {
		t.Fatal("no ledger entry of the lost buckets is a part; the test proves nothing about them")
	}

	w.own.Kill()
	w.own.Start()
	if n := shards[lostShard].DBSize(ctx).Val(); n != 0 {
		t.Fatalf("the restarted server holds %d keys; want it empty", n)
	}
	sum, err := rebuild.Run(ctx, w.deps, options(lostShard))
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if len(sum.Shards) != 1 || !slices.Equal(sorted(sum.Shards[0].Keys), sorted(lost)) {
		t.Fatalf("summary %+v; want shard %d with the buckets %v", sum.Shards, lostShard, lost)
	}
	for _, warn := range sum.Warnings {
		t.Errorf("warning: %s", warn)
	}
	after := snapshots(t, shards, keys, ks)
	for key, want := range before {
		if have := after[key]; !reflect.DeepEqual(want, have) {
			t.Errorf("%s differs after the rebuild (lost: %v):\nbefore %+v\nafter  %+v", key, slices.Contains(lost, key), want, have)
		}
	}
	if left := shards[lostShard].Keys(ctx, "*:rebuild:*").Val(); len(left) > 0 {
		t.Errorf("staging keys left behind: %v", left)
	}

	// A replay of a part the lost bucket held answers from its restored ledger.
	replayed := false
	for _, g := range held {
		l := bucket.LayoutOf(ring.Default, g.Key, g.K)
		for _, p := range l.Parts(g.Stock, g.Pin, g.IP, g.NoIP) {
			if p.Shard != lostShard || replayed {
				continue
			}
			now := time.Now()
			r, err := lua.Grab(ctx, shards[lostShard], lua.GrabCall{NowMs: now.UnixMilli(), DeadlineMs: now.Add(3 * time.Second).UnixMilli(),
				RequestID: g.RID, BodyHash: rt.BodyHash(g.RID, g.Pin, g.IP, g.Key, g.Num), Pin: g.Pin, IP: g.IP, RateFactorPermille: 1000,
				Items: []lua.GrabItem{{Key: p.Key, Num: g.Num, Part: p.Letters, Buckets: g.K}}})
			if err != nil || r.Code != lua.CodeDuplicate || r.LedgerState != lua.LedgerCommitted {
				t.Errorf("replay of %s's part %s on %s: %+v %v; want DUPLICATE G", g.RID, p.Letters, p.Key, r, err)
			}
			replayed = true
		}
	}
	if !replayed {
		t.Error("no held grab had a part on the lost shard")
	}

	// The sale goes on over the rebuilt buckets; verify finds the record and
	// Redis agreeing bucket by bucket.
	bucketSale(t, s, keys[:1], ks[:1], "two-"+suffix, 4, 40)
	vd := verify.Deps{Shards: shards, Record: db.Rebuild, Lag: flowlag.NewMeter(w.brokers, kafkaauth.Auth{}, flow.Topic, "sink-buckets"), Log: quiet()}
	vo := verify.Defaults()
	vo.Rechecks, vo.RecheckDelay = 1, 200*time.Millisecond
	rep, err := verify.Run(ctx, vd, vo)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Promotions) != 4+8 || len(rep.Drifts()) != 0 {
		var out bytes.Buffer
		rep.Print(&out, true)
		t.Fatalf("want 12 bucket hashes checked and no drift, have:\n%s", out.String())
	}
	if remaining, err := lua.RemainingOfBuckets(ctx, shards, ring.Default, keys[0], 4); err != nil || remaining < 0 {
		t.Fatalf("%s remaining %d (%v)", keys[0], remaining, err)
	}

	// One bucket's remaining changed by hand is a drift of that bucket alone.
	shards[lostShard].HIncrBy(ctx, lost[0], "remaining", 1)
	if rep, err = verify.Run(ctx, vd, vo); err != nil {
		t.Fatal(err)
	}
	ds := rep.Drifts()
	if len(ds) != 1 || ds[0].Key != lost[0] || ds[0].Shard != lostShard || ds[0].What != "remaining" || ds[0].Redis != ds[0].Record+1 {
		t.Fatalf("want exactly the planted drift (%s remaining), have %+v", lost[0], ds)
	}
	var out bytes.Buffer
	rep.Print(&out, false)
	if text := out.String(); !strings.Contains(text, "DRIFT  "+lost[0]+"  shard "+fmt.Sprint(lostShard)+"  remaining") ||
		!strings.Contains(text, "verify: 2 promotions (12 bucket hashes)") || !strings.Contains(text, "1 drifts in 1 promotions") {
		t.Fatalf("report:\n%s", text)
	}
}

// A bucketed promotion rebuilt alone (--promo) is restored on every shard of its
// layout, each bucket from its own rows; drifts planted on two buckets are
// repaired and nothing else changes. Every shard is a private server here: the
// run fences all the buckets' shards.
func TestRebuildOfOneBucketedPromotion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	own := rt.StartRedis(t)
	all := map[int]string{}
	for i := range ring.Shards {
		all[i] = own.Addr // one private server for every shard: fences and markers stay ours
	}
	shards := rt.Shards(t, all)
	brokers := rt.Kafka(t).ListenAddrs()
	db := rt.OpenStore(t)
	rt.RunSink(t, brokers, "sink-promo-buckets", db.Flows)
	suffix := testenv.Suffix()
	key := rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: "promo-buckets-" + suffix, Total: 50, PerPin: 4, PerIP: 20, Buckets: 4})
	s := rt.NewSale(shards, brokers)
	defer s.Close()
	if held, _ := bucketSale(t, s, []string{key}, []int{4}, "p-"+suffix, 3, 30); len(held) == 0 {
		t.Fatal("the sale held nothing")
	}
	want := snapshots(t, shards, []string{key}, []int{4})

	l := bucket.LayoutOf(ring.Default, key, 4)
	shards[l.Shards[1]].HSet(ctx, l.Keys[1], "remaining", 999)
	for pin := range want[l.Keys[3]].Pins {
		shards[l.Shards[3]].HIncrBy(ctx, promo.PinsKey(l.Keys[3]), pin, 2)
		break
	}
	id, typ, _ := promo.ParseKey(key)
	o := options()
	o.Promo = &store.ID{PromoID: id, Type: typ}
	d := rebuild.Deps{Shards: shards, Record: db.Rebuild, Flows: db.Flows, Lag: flowlag.NewMeter(brokers, kafkaauth.Auth{}, flow.Topic, "sink-promo-buckets"), Log: quiet()}
	sum, err := rebuild.Run(ctx, d, o)
	if err != nil {
		t.Fatalf("rebuild --promo: %v", err)
	}
	var restored []string
	for _, ss := range sum.Shards {
		restored = append(restored, ss.Keys...)
	}
	if !slices.Equal(sorted(restored), sorted(l.Keys)) {
		t.Fatalf("restored %v; want every bucket %v", restored, l.Keys)
	}
	if have := snapshots(t, shards, []string{key}, []int{4}); !reflect.DeepEqual(want, have) {
		t.Errorf("after rebuild --promo:\nwant %+v\nhave %+v", want, have)
	}
	for _, s := range l.Shards {
		if shards[s].Exists(ctx, promo.FenceKey(s)).Val() != 0 {
			t.Errorf("shard %d: fence left up", s)
		}
	}
}

func sorted(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return out
}
