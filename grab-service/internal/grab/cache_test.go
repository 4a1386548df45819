package grab

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
)

// fakeClock is a service clock tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *fakeClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) add(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }

// cacheService is a service on the stack's shards with cfg and clock.
func cacheService(t *testing.T, cfg Config, clock func() time.Time) *Grabber {
	t.Helper()
	clients := testenv.Shards(t)
	shards := make([]redis.UniversalClient, len(clients))
	for i, c := range clients {
		shards[i] = c
	}
	s, err := New(cfg, Deps{Shards: shards, Publisher: &grabtest.Publisher{}, Switches: configcenter.NewHolder(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// heapAlloc is the live heap after a collection.
func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// entryBound is a generous bound on one cache entry's heap: the key (at most 75
// bytes), the cached status (its promoId at most 64 more) and the library's list
// element and map slot. The test logs what an entry costs (about 300 bytes).
const entryBound = 1 << 10

// The status route is public and each distinct promotion asked for was kept for
// good: 124,000 random ids in 15 s grew an instance by 100 MB, freed never. A
// million distinct keys now cost at most the caches' size, and so does a flood
// through the real read path.
func TestFloodOfDistinctPromotionsStaysBounded(t *testing.T) {
	t.Parallel()
	cfg := Defaults()
	cfg.StatusRate = 0 // the limit is TestStatusRateLimit's; here the cache meets the whole flood
	// The service's clock stands still: the flood takes seconds under the race
	// detector, and the sweeper, on a running clock, would drop the first entries
	// (their age is TestCachedEntriesGoUnreadAfterTheirTime's) before the count.
	now := time.Now()
	s := cacheService(t, cfg, func() time.Time { return now })
	run := testenv.Suffix()

	// A million keys straight into both caches, as the status path and the grab
	// path put them (the Redis round trips would take minutes).
	before := heapAlloc()
	start := time.Now()
	for i := range 1_000_000 {
		key := promo.Key("flood-"+run+"-"+strconv.Itoa(i), 1+i%99)
		s.status.m.Put(key, cachedStatus{}, now)
		s.refusals.Put(key, cachedRefusal{o: NotFound}, now)
		if i%4096 == 0 && (s.status.m.Len() > cfg.StatusCacheSize || s.refusals.Len() > cfg.RefusalCacheSize) {
			t.Fatalf("after %d keys the caches hold %d and %d; their sizes are %d and %d",
				i+1, s.status.m.Len(), s.refusals.Len(), cfg.StatusCacheSize, cfg.RefusalCacheSize)
		}
	}
	if s.status.m.Len() != cfg.StatusCacheSize || s.refusals.Len() != cfg.RefusalCacheSize {
		t.Fatalf("after the flood the caches hold %d and %d; want their sizes, %d and %d",
			s.status.m.Len(), s.refusals.Len(), cfg.StatusCacheSize, cfg.RefusalCacheSize)
	}
	grew := heapAlloc() - before
	entries := int64(cfg.StatusCacheSize + cfg.RefusalCacheSize)
	t.Logf("1,000,000 keys into each cache in %s: heap grew %d KiB for %d entries (%d B each)",
		time.Since(start).Round(time.Millisecond), grew>>10, entries, grew/entries)
	if bound := entries * entryBound; grew > bound {
		t.Fatalf("the heap grew %d KiB; the bound is %d KiB (%d entries of %d B)", grew>>10, bound>>10, entries, entryBound)
	}

	// Through Status and the shards: twice the cache's size of promotions that do
	// not exist, each answered NOT_FOUND and cached, from 16 callers at once.
	const callers, flood = 16, 2 * DefaultStatusCacheSize
	start = time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var over atomic.Int64
	for range callers {
		wg.Go(func() {
			for i := next.Add(1); i <= flood; i = next.Add(1) {
				if _, err := s.Status(context.Background(), "route-"+run+"-"+strconv.FormatInt(i, 10), 1); err != ErrPromotionNotFound {
					t.Errorf("status of a promotion that does not exist: %v", err)
					return
				}
				if n := s.status.m.Len(); n > cfg.StatusCacheSize {
					over.Store(int64(n))
				}
			}
		})
	}
	wg.Wait()
	if n := over.Load(); n > 0 {
		t.Fatalf("the status cache held %d entries during the flood; its size is %d", n, cfg.StatusCacheSize)
	}
	grew = heapAlloc() - before
	t.Logf("then %d distinct promotions through Status in %s: heap %d KiB above the start",
		flood, time.Since(start).Round(time.Millisecond), grew>>10)
	// The shard clients' connections (a pool per shard, with their buffers) come on
	// top of the caches' entries.
	if bound := entries*entryBound + 16<<20; grew > bound {
		t.Fatalf("the heap grew %d KiB; the bound is %d KiB", grew>>10, bound>>10)
	}
	runtime.KeepAlive(s)
}

// An entry goes once its time has passed, read again or not: the sweeper drops
// it by the service's clock, so a flood's memory comes back when the flood stops.
// Until then it answers, and never past its time.
func TestCachedEntriesGoUnreadAfterTheirTime(t *testing.T) {
	t.Parallel()
	cfg := Defaults()
	cfg.CacheSweepEvery = 5 * time.Millisecond
	t0 := time.Now()
	clock := newFakeClock(t0)
	s := cacheService(t, cfg, clock.now)
	run := testenv.Suffix()
	ctx := context.Background()

	const n = 100
	for i := range n {
		if _, err := s.Status(ctx, "aged-"+run+"-"+strconv.Itoa(i), 1); err != ErrPromotionNotFound {
			t.Fatalf("status of a promotion that does not exist: %v", err)
		}
	}
	// A grab of one (first attempt: no claim is read) caches its NOT_FOUND.
	missing := "aged-" + run + "-0"
	if res, err := s.Grab(ctx, Request{RequestID: "aged-" + run, Pin: "p", IP: "198.18.0.1", FirstAttempt: true,
		Items: []Item{{PromoID: missing, Type: 1, Num: 1}}}); err != nil || res.Result != NotFound {
		t.Fatalf("grab of a promotion that does not exist: %+v %v", res, err)
	}
	key := promo.Key(missing, 1)
	time.Sleep(50 * time.Millisecond) // ten sweeps: nothing is due yet
	if s.status.m.Len() != n || s.refusals.Len() != 1 {
		t.Fatalf("before their time the caches hold %d and %d; want %d and 1", s.status.m.Len(), s.refusals.Len(), n)
	}
	clock.add(cfg.RefusalTTL - time.Nanosecond)
	if r, ok := s.refusals.Get(key, s.Clock()); !ok || r.o != NotFound {
		t.Fatalf("the refusal just before its time: %v %v", r.o, ok)
	}
	clock.add(time.Nanosecond)
	if _, ok := s.refusals.Get(key, s.Clock()); ok {
		t.Fatal("a refusal answered past its RefusalTTL")
	}
	clock.set(t0.Add(cfg.StatusTTL + StatusStale - time.Nanosecond))
	if _, ok := s.status.m.GetStale(promo.Key(missing, 1), s.Clock()); !ok {
		t.Fatal("a status entry gone before its stale keep ended")
	}
	time.Sleep(50 * time.Millisecond) // ten sweeps: it stays for GetStale
	if s.status.m.Len() != n {
		t.Fatalf("%d status entries within their stale keep; want %d", s.status.m.Len(), n)
	}
	clock.set(t0.Add(max(cfg.StatusTTL+StatusStale, cfg.RefusalTTL)))
	deadline := time.Now().Add(30 * time.Second) // a hang guard: the sweeper's pace is the service clock's
	for s.status.m.Len() > 0 || s.refusals.Len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d status and %d refusal entries still held %d ms of service time after they lapsed",
				s.status.m.Len(), s.refusals.Len(), clock.now().Sub(t0).Milliseconds())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Every outcome the refusal cache holds has its constant message, the one the
// answer has always carried.
func TestCachedMessage(t *testing.T) {
	for _, o := range []Outcome{SoldOut, Stopped, Ended, NotFound, NotStarted, Blocked} {
		if got, want := cachedMessage(o), "answered from the local "+string(o)+" cache"; got != want {
			t.Errorf("%s: message %q, want %q", o, got, want)
		}
	}
}
