package bucket

import (
	"context"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

func TestKeysSitOnDistinctShards(t *testing.T) {
	for k := 1; k <= Max; k++ {
		keys := Keys(ring.Default, "C_hot_1", k)
		shards := map[int]bool{}
		for _, bk := range keys {
			shards[ring.Default.Shard(bk)] = true
		}
		if len(keys) != k || len(shards) != k {
			t.Fatalf("k=%d: %d keys on %d shards", k, len(keys), len(shards))
		}
		if !reflect.DeepEqual(keys, Keys(ring.Default, "C_hot_1", k)) {
			t.Fatalf("k=%d: layout not deterministic", k)
		}
		if k > 1 && !reflect.DeepEqual(keys[:k-1], Keys(ring.Default, "C_hot_1", k-1)) {
			t.Fatalf("k=%d: not an extension of k-1", k)
		}
	}
}

func TestKeysRefuseMoreBucketsThanShards(t *testing.T) {
	for _, k := range []int{0, -1, Max + 1} {
		if keys := Keys(ring.Default, "C_hot_1", k); keys != nil {
			t.Errorf("k=%d: %v", k, keys)
		}
	}
}

func TestShares(t *testing.T) {
	for _, c := range []struct {
		total int64
		k     int
		want  []int64
	}{{10, 1, []int64{10}}, {10, 4, []int64{3, 3, 2, 2}}, {3, 4, []int64{1, 1, 1, 0}}, {0, 2, []int64{0, 0}}} {
		if got := Shares(c.total, c.k); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Shares(%d, %d) = %v, want %v", c.total, c.k, got, c.want)
		}
	}
}

func TestPlan(t *testing.T) {
	for _, c := range []struct {
		stock, pin, ip int
		countIP        bool
		want           []Part
	}{
		{0, 0, 0, true, []Part{{0, ""}}}, // every home is the stock bucket: an ordinary item
		{0, 0, 0, false, []Part{{0, ""}}},
		{1, 1, 2, true, []Part{{1, "sp"}, {2, "i"}}},
		{1, 1, 2, false, []Part{{1, "spn"}}}, // the ip's home would cost a shard of its own
		{1, 2, 1, true, []Part{{1, "si"}, {2, "p"}}},
		{1, 2, 1, false, []Part{{1, "si"}, {2, "p"}}}, // counted where a part goes anyway
		{3, 0, 0, true, []Part{{3, "s"}, {0, "pi"}}},
		{3, 0, 1, true, []Part{{3, "s"}, {0, "p"}, {1, "i"}}},
		{3, 0, 1, false, []Part{{3, "s"}, {0, "pn"}}},
	} {
		if got := Plan(c.stock, c.pin, c.ip, c.countIP); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Plan(%d, %d, %d, %v) = %v, want %v", c.stock, c.pin, c.ip, c.countIP, got, c.want)
		}
	}
}

// fixture is a bucketed promotion on the local stack's shards, deleted at the end.
type fixture struct {
	t      *testing.T
	shards []redis.UniversalClient
	key    string
	k      int
	g      *Grabber
}

func newFixture(t *testing.T, k int, spec lua.AdminSpec) *fixture {
	t.Helper()
	var shards []redis.UniversalClient
	for _, c := range testenv.Shards(t) {
		shards = append(shards, c)
	}
	f := &fixture{t: t, shards: shards, key: promo.Key("bk"+testenv.Suffix(), 1), k: k,
		g: &Grabber{Shards: shards, Ring: ring.Default, EmptyTTL: 500 * time.Millisecond}}
	ctx := context.Background()
	if err := Create(ctx, shards, ring.Default, f.key, k, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Delete(context.Background(), shards, ring.Default, f.key, k) })
	return f
}

func spec(total, perPin, perIP int64) lua.AdminSpec {
	now := time.Now().UnixMilli()
	return lua.AdminSpec{Ver: 1, Total: total, PerPin: perPin, PerIP: perIP, MaxPerGrab: 1,
		StartMs: now - 60_000, EndMs: now + 3_600_000, State: "ACTIVE"}
}

func (f *fixture) grab(rid, pin, ip string) Reply {
	now := time.Now()
	r, err := f.g.Grab(context.Background(), Request{Key: f.key, Buckets: f.k, RequestID: rid, BodyHash: "h" + rid,
		Pin: pin, IP: ip, Num: 1, Now: now, Deadline: now.Add(time.Minute), RateFactorPermille: 1000})
	if err != nil {
		f.t.Fatalf("grab %s: %v", rid, err)
	}
	return r
}

// held sums the field (a pin or an ip) over every bucket's counter hash.
func (f *fixture) held(companion func(string) string, field string) int64 {
	m, err := Held(context.Background(), f.shards, ring.Default, f.key, f.k, companion)
	if err != nil {
		f.t.Fatal(err)
	}
	return m[field]
}

func (f *fixture) remaining() int64 {
	n, err := Remaining(context.Background(), f.shards, ring.Default, f.key, f.k)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// sweep grabs with fresh buyers and a grabber that knows no bucket empty, one at a
// time, until one is refused SOLD_OUT: with nothing else in flight, that refusal
// tried every bucket on Redis and found each empty. It returns the units granted.
// A concurrent wave can leave units behind a known-empty mark: a bucket briefly
// empty while another grab's part held its last unit, given back when that grab
// was refused elsewhere.
func (f *fixture) sweep() int {
	g := f.g
	f.g = &Grabber{Shards: g.Shards, Ring: g.Ring, EmptyTTL: g.EmptyTTL}
	defer func() { f.g = g }()
	for n := 0; ; n++ {
		s := strconv.Itoa(n)
		switch r := f.grab("sweep"+s, "sweep"+s, "10.250.0."+s); r.Code {
		case lua.CodeOK:
		case lua.CodeSoldOut:
			return n
		default:
			f.t.Fatalf("sweep grab %d: %+v", n, r)
		}
	}
}

// run sends grabs 0..n-1 from conc goroutines and tallies the answers.
func run(n, conc int, grab func(i int) Reply) map[lua.Code]int {
	var mu sync.Mutex
	out := map[lua.Code]int{}
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r := grab(i)
				mu.Lock()
				out[r.Code]++
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// TestLastUnitsUnderConcurrentBuyers: with the stock in 4 uneven shares and far
// more buyers than units, all of them at home on bucket 0, exactly the total is
// granted and every bucket ends at 0: all but bucket 0's share came from donors.
func TestLastUnitsUnderConcurrentBuyers(t *testing.T) {
	const total, buyers = 37, 300
	f := newFixture(t, 4, spec(total, 1, 1))
	var pins []string
	for i := 0; len(pins) < buyers; i++ {
		if p := "pin" + strconv.Itoa(i); Home(p, f.k) == 0 {
			pins = append(pins, p)
		}
	}
	var mu sync.Mutex
	donated := 0
	got := run(buyers, 64, func(i int) Reply {
		r := f.grab("r"+strconv.Itoa(i), pins[i], "10.1."+strconv.Itoa(i/250)+"."+strconv.Itoa(i%250))
		if r.Code == lua.CodeOK && r.Stock != 0 {
			mu.Lock()
			donated++
			mu.Unlock()
		}
		return r
	})
	swept := f.sweep()
	if got[lua.CodeOK]+swept != total || got[lua.CodeOK]+got[lua.CodeSoldOut] != buyers {
		t.Fatalf("answers %v and %d in the sweep, want %d OK in all and only OK or SOLD_OUT", got, swept, total)
	}
	if rem := f.remaining(); rem != 0 {
		t.Fatalf("remaining %d after the sell-out", rem)
	}
	if home := Shares(total, f.k)[0]; int64(donated+swept) < total-home {
		t.Fatalf("%d grants from donors, want at least %d (all but the home's share)", donated+swept, total-home)
	}
}

// TestLimitsHoldAcrossFallOver: one pin (limit 1) and one ip (limit 2) hammer a
// promotion whose buckets empty under other buyers; however the grabs fall over,
// the pin holds 1 unit and the ip 2, on their home buckets only.
func TestLimitsHoldAcrossFallOver(t *testing.T) {
	const total = 40
	f := newFixture(t, 8, spec(total, 1, 2))
	got := run(400, 64, func(i int) Reply {
		rid := "r" + strconv.Itoa(i)
		switch i % 4 {
		case 0: // the greedy pin, from many ips
			return f.grab(rid, "greedy", "10.2.0."+strconv.Itoa(i%200))
		case 1: // many pins behind the greedy ip
			return f.grab(rid, "pin"+strconv.Itoa(i), "10.9.9.9")
		}
		return f.grab(rid, "other"+strconv.Itoa(i), "10.3."+strconv.Itoa(i/250)+"."+strconv.Itoa(i%250))
	})
	if swept := f.sweep(); got[lua.CodeOK]+swept != total {
		t.Fatalf("answers %v and %d in the sweep, want %d OK in all", got, swept, total)
	}
	// Served, and never past the limit. Not always to the limit: a unit counted while
	// its grab was pending refuses the pin's (ip's) other grabs, and is given back if
	// that grab is then refused on another shard, by which time the stock may be gone.
	pins, ips := f.held(promo.PinsKey, "greedy"), f.held(promo.IPsKey, "10.9.9.9")
	if pins < 1 || pins > 1 || ips < 1 || ips > 2 {
		t.Fatalf("over all buckets pin greedy holds %d (limit 1), ip 10.9.9.9 holds %d (limit 2)", pins, ips)
	}
	home := Keys(ring.Default, f.key, f.k)[Home("greedy", f.k)]
	if n, _ := f.shards[ring.Default.Shard(home)].HGet(context.Background(), promo.PinsKey(home), "greedy").Int64(); n != pins {
		t.Fatalf("pin greedy's home bucket counts %d of its %d units", n, pins)
	}
}

// TestCrashedGrabIsGivenBackWhole: a grab whose parts were taken on three buckets
// but never committed (the process died) is aborted by the reconciler's call: the
// stock and both counters come back, the stock part owes its CANCEL, the quota
// parts are final, and the pin can grab again.
func TestCrashedGrabIsGivenBackWhole(t *testing.T) {
	f := newFixture(t, 4, spec(8, 1, 1))
	pin, ip := "", ""
	for i := 0; pin == "" || ip == ""; i++ { // a pin and an ip with different homes
		if s := strconv.Itoa(i); Home("pin"+s, f.k) == 0 && pin == "" {
			pin = "pin" + s
		} else if Home("10.0.0."+s, f.k) == 1 && ip == "" {
			ip = "10.0.0." + s
		}
	}
	keys := Keys(ring.Default, f.key, f.k)
	now := time.Now()
	req := Request{Key: f.key, Buckets: f.k, RequestID: "crash", BodyHash: "h", Pin: pin, IP: ip, Num: 1,
		Now: now, Deadline: now.Add(time.Minute), RateFactorPermille: 1000}
	ctx := context.Background()
	calls := f.g.shardCalls(req, keys, Plan(2, 0, 1, true))
	for _, c := range calls { // taken, then the process dies before the commit
		if r, err := lua.Grab(ctx, f.shards[c.shard], c.call); err != nil || r.Code != lua.CodeOK {
			t.Fatalf("take on shard %d: %+v %v", c.shard, r, err)
		}
	}
	if f.remaining() != 7 || f.held(promo.PinsKey, pin) != 1 || f.held(promo.IPsKey, ip) != 1 {
		t.Fatal("the parts did not take")
	}
	for _, c := range calls {
		r, err := lua.Return(ctx, f.shards[c.shard], lua.ReturnCall{RequestID: "crash", Mode: lua.ReturnAbort, NowMs: now.UnixMilli(), Keys: c.keys})
		if err != nil || r.Code != lua.ReturnReturned {
			t.Fatalf("abort on shard %d: %+v %v", c.shard, r, err)
		}
	}
	if f.remaining() != 8 || f.held(promo.PinsKey, pin) != 0 || f.held(promo.IPsKey, ip) != 0 {
		t.Fatalf("after abort: remaining %d, pin %d, ip %d", f.remaining(), f.held(promo.PinsKey, pin), f.held(promo.IPsKey, ip))
	}
	want := map[int]string{2: lua.LedgerAborted, 0: lua.LedgerAbortRecorded, 1: lua.LedgerAbortRecorded}
	for b, st := range want {
		e, ok, err := lua.ReadLedger(ctx, f.shards[ring.Default.Shard(keys[b])], keys[b], "crash")
		if err != nil || !ok || e.State != st {
			t.Fatalf("bucket %d entry %+v (found %v, %v), want state %s", b, e, ok, err, st)
		}
	}
	if r := f.grab("again", pin, ip); r.Code != lua.CodeOK {
		t.Fatalf("grab after the abort: %+v", r)
	}
}

// TestIPPartOnlyWhereALimitNeedsIt: without an ip limit a grab leaves out an ip
// part that would cost a shard of its own; with one, the first grab is told so by
// q.lua, sent again with it, and every later grab carries it: the ip's limit holds
// across buckets from the first grab on.
func TestIPPartOnlyWhereALimitNeedsIt(t *testing.T) {
	pin, ip := "", ""
	for i := 0; pin == "" || ip == ""; i++ { // homes 0 and 1 of 4
		if s := strconv.Itoa(i); Home("pin"+s, 4) == 0 && pin == "" {
			pin = "pin" + s
		} else if Home("10.4.0."+s, 4) == 1 && ip == "" {
			ip = "10.4.0." + s
		}
	}
	free := newFixture(t, 4, spec(10, 0, 0))
	if r := free.grab("a", pin, ip); r.Code != lua.CodeOK || r.Tries != 1 {
		t.Fatalf("grab without an ip limit: %+v", r)
	}
	if n := free.held(promo.IPsKey, ip); n != 0 {
		t.Fatalf("ip counted (%d) with no limit to count for, at the cost of a shard", n)
	}

	limited := newFixture(t, 4, spec(10, 0, 1))
	limited.g = free.g // the same process: it has learned nothing of this promotion
	if r := limited.grab("b", pin, ip); r.Code != lua.CodeOK || r.Tries != 2 {
		t.Fatalf("first grab with an ip limit: %+v, want OK on the second try", r)
	}
	if r := limited.grab("c", pin+"x", ip); r.Code != lua.CodeIPLimit || r.Tries != 1 {
		t.Fatalf("second grab from the ip: %+v, want IP_LIMIT at once", r)
	}
	if n := limited.held(promo.IPsKey, ip); n != 1 {
		t.Fatalf("ip holds %d over all buckets, limit 1", n)
	}
}

// TestOneBucketIsAnOrdinaryPromotion: with k = 1 a grab is one ordinary item, and
// its ledger entry is exactly what an unbucketed grab writes.
func TestOneBucketIsAnOrdinaryPromotion(t *testing.T) {
	f := newFixture(t, 1, spec(2, 1, 0))
	if r := f.grab("r1", "p1", "ip"); r.Code != lua.CodeOK || r.Tries != 1 {
		t.Fatalf("grab: %+v", r)
	}
	bk := Keys(ring.Default, f.key, 1)[0]
	e, ok, err := lua.ReadLedger(context.Background(), f.shards[ring.Default.Shard(bk)], bk, "r1")
	if err != nil || !ok || e.State != lua.LedgerCommitted || e.Part != "" {
		t.Fatalf("entry %+v found=%v err=%v", e, ok, err)
	}
	if r := f.grab("r2", "p1", "ip"); r.Code != lua.CodePinLimit {
		t.Fatalf("second grab of p1: %+v, want PIN_LIMIT", r)
	}
}

func TestGrabRefusesABadBucketCount(t *testing.T) {
	g := &Grabber{Ring: ring.Default}
	for _, k := range []int{0, -1, Max + 1} {
		if _, err := g.Grab(context.Background(), Request{Key: "C_x_1", Buckets: k, RequestID: "r"}); err == nil {
			t.Errorf("%d buckets accepted", k)
		}
	}
}
