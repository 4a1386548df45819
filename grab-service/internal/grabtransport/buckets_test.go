package grabtransport_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/lua"
)

// bucketed creates a promotion in k buckets directly on their shards, as
// promo-admin does (docs/CONTRACT.md, "Buckets"), and returns its id and layout.
func (e *env) bucketed(name string, k int, s spec) (string, bucket.Layout) {
	e.t.Helper()
	id := fmt.Sprintf("%s-%s", name, e.suffix)
	s = e.defaults(s)
	key := promo.Key(id, 1)
	clients := e.clients()
	err := lua.CreateBuckets(context.Background(), clients, ring.Default, key, k, lua.AdminSpec{Ver: 1, Total: s.total, PerPin: s.perPin,
		PerIP: s.perIP, MaxPerGrab: s.maxPerGrab, RateLimit: s.rateLimit, RateWindowMs: 60_000,
		StartMs: s.start.UnixMilli(), EndMs: s.end.UnixMilli(), State: "ACTIVE", Channels: s.channels})
	if err != nil {
		e.t.Fatal(err)
	}
	return id, bucket.LayoutOf(ring.Default, key, k)
}

// buckets reads every bucket of a layout: remaining by bucket, and what each pin
// and ip holds over all of them.
func (e *env) buckets(id string, l bucket.Layout) (remaining []int64, pins, ips map[string]int64) {
	e.t.Helper()
	ctx := context.Background()
	key := promo.Key(id, 1)
	for b, bk := range l.Keys {
		h, found, err := lua.ReadHash(ctx, e.shards[l.Shards[b]], bk)
		if err != nil || !found {
			e.t.Fatalf("bucket %d (%s): found=%v err=%v", b, bk, found, err)
		}
		remaining = append(remaining, h.Remaining)
	}
	var err error
	if pins, err = bucket.Held(ctx, e.clients(), ring.Default, key, l.K, promo.PinsKey); err != nil {
		e.t.Fatal(err)
	}
	if ips, err = bucket.Held(ctx, e.clients(), ring.Default, key, l.K, promo.IPsKey); err != nil {
		e.t.Fatal(err)
	}
	return remaining, pins, ips
}

func sum(xs []int64) (n int64) {
	for _, x := range xs {
		n += x
	}
	return n
}

// grantedFrom counts, by bucket, the units the acknowledged events of one
// promotion took (GRAB) less those given back (CANCEL), checking that every item
// names its bucket's shard and the count.
func (e *env) grantedFrom(id string, l bucket.Layout) []int64 {
	e.t.Helper()
	out := make([]int64, l.K)
	for _, ev := range e.pub.Events() {
		for _, it := range ev.Items {
			if it.PromoID != id {
				continue
			}
			if it.Buckets != l.K || it.Bucket < 0 || it.Bucket >= l.K || it.Shard != l.Shards[it.Bucket] {
				e.t.Fatalf("%s item %+v does not name its bucket of %d (shards %v)", ev.Kind, it, l.K, l.Shards)
			}
			if ev.Kind == flow.Grab {
				out[it.Bucket] += it.Num
			} else {
				out[it.Bucket] -= it.Num
			}
		}
	}
	return out
}

// 400 buyers at concurrency 200 against 200 units in 8 buckets: exactly 200
// granted, every bucket emptied (buyers whose home sold out were served by
// others), and each bucket's grants by the events equal its share.
func TestBucketedSaleSellsOutExactly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const k, total, buyers, workers = 8, 200, 400, 200
	id, l := e.bucketed("bsale", k, spec{total: total, maxPerGrab: 1})
	var granted, soldOut, fellOver atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				a := e.grab(grabBody(fmt.Sprintf("b-%d", n), fmt.Sprintf("pin-%d", n), fmt.Sprintf("10.1.%d.%d", n/250, n%250), id, 1))
				switch {
				case a.status == http.StatusOK && a.res.Result == grab.Granted:
					granted.Add(1)
				case a.status == http.StatusConflict && a.res.Result == grab.SoldOut:
					soldOut.Add(1)
				case a.status == http.StatusServiceUnavailable && a.res.Result == grab.Unavailable:
				default:
					t.Errorf("unexpected answer %d %s", a.status, a.raw)
				}
			}
		}()
	}
	for n := range buyers {
		jobs <- n
	}
	close(jobs)
	wg.Wait()
	if granted.Load() != total {
		t.Fatalf("granted %d, want exactly %d (sold out %d)", granted.Load(), total, soldOut.Load())
	}
	remaining, pins, _ := e.buckets(id, l)
	if sum(remaining) != 0 {
		t.Errorf("remaining by bucket %v after selling out, want all 0", remaining)
	}
	if sum(valuesOf(pins)) != total {
		t.Errorf("pins hold %d over the buckets, want %d", sum(valuesOf(pins)), total)
	}
	shares := bucket.Shares(total, k)
	if got := e.grantedFrom(id, l); fmt.Sprint(got) != fmt.Sprint(shares) {
		t.Errorf("granted by bucket (events) %v, want the shares %v", got, shares)
	}
	for _, ev := range e.pub.Events() {
		if ev.Kind == flow.Grab && ev.Items[0].Bucket != bucket.Home(ev.Pin, k) {
			fellOver.Add(1)
		}
	}
	if fellOver.Load() == 0 {
		t.Errorf("no grant came from a bucket other than its buyer's home: the fall-over was not exercised")
	}
	if st, err := e.svc.Status(context.Background(), id, 1); err != nil || st.State != promo.SoldOut || st.Remaining != 0 {
		t.Errorf("status %+v %v, want SOLD_OUT with 0 remaining over the buckets", st, err)
	}
	// Eight buckets emptied at saturation, in any order: the sale announces one SOLD_OUT.
	if have := e.stateEvents(1); !slices.Equal(have, []string{"bsale SOLD_OUT"}) {
		t.Errorf("promo-state: %v, want one SOLD_OUT", have)
	}
	waitFor(t, "the outbox to empty", func() bool { return e.outboxLen() == 0 })
}

func valuesOf(m map[string]int64) []int64 {
	out := make([]int64, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// 300 pins with a limit of 2, each trying four times at once, against 640 units
// in 8 buckets: exactly 600 granted, no pin above 2 although busy homes sold out
// and their buyers were served by other buckets, each pin counted on its home.
func TestBucketedPerPinLimitHoldsAcrossBuckets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const k, pinsN, tries = 8, 300, 4
	id, l := e.bucketed("blimit", k, spec{total: 640, perPin: 2, maxPerGrab: 1})
	var granted atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 200)
	for p := range pinsN {
		for n := range tries {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				a := e.grab(grabBody(fmt.Sprintf("l-%d-%d", p, n), fmt.Sprintf("pin-%d", p), "10.2.0.1", id, 1))
				switch {
				case a.status == http.StatusOK && a.res.Result == grab.Granted:
					granted.Add(1)
				case a.status == http.StatusConflict && (a.res.Result == grab.PinLimit || a.res.Result == grab.SoldOut):
				case a.status == http.StatusServiceUnavailable && a.res.Result == grab.Unavailable:
				default:
					t.Errorf("unexpected answer %d %s", a.status, a.raw)
				}
			}()
		}
	}
	wg.Wait()
	if granted.Load() != 2*pinsN {
		t.Fatalf("granted %d, want exactly %d", granted.Load(), 2*pinsN)
	}
	remaining, pins, _ := e.buckets(id, l)
	if sum(remaining) != 640-2*pinsN {
		t.Errorf("remaining %v (sum %d), want %d", remaining, sum(remaining), 640-2*pinsN)
	}
	ctx := context.Background()
	for p := range pinsN {
		pin := fmt.Sprintf("pin-%d", p)
		if pins[pin] != 2 {
			t.Errorf("%s holds %d over the buckets, want 2", pin, pins[pin])
		}
		home := bucket.Home(pin, k)
		if n, _ := e.shards[l.Shards[home]].HGet(ctx, promo.PinsKey(l.Keys[home]), pin).Int64(); n != 2 {
			t.Errorf("%s counted %d on its home bucket %d, want 2 (a pin is counted on its home only)", pin, n, home)
		}
	}
	if fell := e.grantedFrom(id, l); sum(fell) != 2*pinsN {
		t.Errorf("events grant %d, want %d", sum(fell), 2*pinsN)
	}
}

// A cancel gives the units back to the bucket they came from, and the pin's and
// ip's counts on their homes; its CANCEL names that bucket.
func TestBucketedCancelReturnsToItsBucket(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id, l := e.bucketed("bcancel", 4, spec{total: 40, perPin: 5, perIP: 5})
	before, _, _ := e.buckets(id, l)
	if a := e.grab(grabBody("c-1", "carol", "10.3.0.1", id, 3)); a.res.Result != grab.Granted {
		t.Fatalf("grab: %d %s", a.status, a.raw)
	}
	from := e.pub.Events()[0].Items[0].Bucket
	mid, pins, ips := e.buckets(id, l)
	if mid[from] != before[from]-3 || sum(mid) != sum(before)-3 || pins["carol"] != 3 || ips["10.3.0.1"] != 3 {
		t.Fatalf("after the grab: remaining %v (from bucket %d), pin %d, ip %d", mid, from, pins["carol"], ips["10.3.0.1"])
	}
	if a := e.cancel("c-1", "carol"); a.res.Result != grab.Returned {
		t.Fatalf("cancel: %d %s", a.status, a.raw)
	}
	after, pins, ips := e.buckets(id, l)
	if fmt.Sprint(after) != fmt.Sprint(before) || pins["carol"] != 0 || ips["10.3.0.1"] != 0 {
		t.Fatalf("after the cancel: remaining %v, want %v; pin %d ip %d, want 0", after, before, pins["carol"], ips["10.3.0.1"])
	}
	evs := e.pub.Events()
	if len(evs) != 2 || evs[1].Kind != flow.Cancel || evs[1].Items[0].Bucket != from {
		t.Fatalf("events %+v, want the GRAB and a CANCEL of bucket %d", evs, from)
	}
	if got := e.grantedFrom(id, l); sum(got) != 0 {
		t.Errorf("events net %v, want 0", got)
	}
}

// A grab of a bucketed and a plain promotion is all or nothing: the plain one sold
// out, the bucketed one keeps every unit and count.
func TestBucketedAndPlainItemsAreAllOrNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id, l := e.bucketed("bmix", 4, spec{total: 8, perPin: 5})
	plain := e.promotion("bmix-plain", spec{total: 1})
	if a := e.grab(grabBody("m-0", "dan", "10.4.0.1", plain, 1)); a.res.Result != grab.Granted {
		t.Fatalf("first grab of the plain promotion: %s", a.raw)
	}
	a := e.grab(grabBody("m-1", "erin", "10.4.0.2", id, 2, plain, 1))
	if a.status != http.StatusConflict || a.res.Result != grab.SoldOut || a.res.FailedItem == nil || *a.res.FailedItem != 1 {
		t.Fatalf("mixed grab: %d %s, want SOLD_OUT on item 1", a.status, a.raw)
	}
	remaining, pins, ips := e.buckets(id, l)
	if sum(remaining) != 8 || pins["erin"] != 0 || ips["10.4.0.2"] != 0 {
		t.Fatalf("the refused grab left remaining %v, pin %d, ip %d", remaining, pins["erin"], ips["10.4.0.2"])
	}
	ok := e.grab(grabBody("m-2", "erin", "10.4.0.2", id, 2))
	if ok.res.Result != grab.Granted || len(ok.res.Items) != 1 || ok.res.Items[0].Remaining == nil {
		t.Fatalf("grab of the bucketed promotion alone: %s", ok.raw)
	}
}

// Killed after its takes and before the GRAB was sent, a bucketed grab's parts
// are all given back by the reconciler, and only the stock's part owes (and
// gets) a CANCEL.
func TestBucketedCrashBeforePublishIsReturned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, crashAt("after-take"))
	id, l := e.bucketed("bcrash", 8, spec{total: 16, perPin: 5, perIP: 5})
	var pin string
	for n := 0; ; n++ { // a buyer whose pin and ip homes differ: three parts on three shards
		pin = fmt.Sprintf("frank-%d", n)
		if bucket.Home(pin, 8) != bucket.Home("10.5.0.1", 8) {
			break
		}
	}
	if r := e.grab(grabBody("k-1", pin, "10.5.0.1", id, 2)); r.status != http.StatusInternalServerError {
		t.Fatalf("the killed grab answered %d %s", r.status, r.raw)
	}
	remaining, pins, ips := e.buckets(id, l)
	if sum(remaining) != 14 || pins[pin] != 2 || ips["10.5.0.1"] != 2 {
		t.Fatalf("want the parts open: remaining %v, pin %d, ip %d", remaining, pins[pin], ips["10.5.0.1"])
	}
	e.pastDeadline()
	st := e.reconcile()
	if st.Aborted < 2 || st.Published != 1 {
		t.Fatalf("reconcile: %+v, want every part aborted and one CANCEL", st)
	}
	remaining, pins, ips = e.buckets(id, l)
	if sum(remaining) != 16 || pins[pin] != 0 || ips["10.5.0.1"] != 0 {
		t.Fatalf("after reconcile: remaining %v, pin %d, ip %d", remaining, pins[pin], ips["10.5.0.1"])
	}
	evs := e.pub.Events()
	if len(evs) != 1 || evs[0].Kind != flow.Cancel || evs[0].Items[0].Buckets != 8 || evs[0].Items[0].Bucket != bucket.Home(pin, 8) {
		t.Fatalf("events %+v, want one CANCEL naming the pin's home bucket of 8", evs)
	}
}

// Killed after Kafka acknowledged a bucketed grab's GRAB, before its commits: the
// reconciler finds the record's word (or a committed part) and commits every part,
// so the grant stands on the buckets as the record says, and nothing is owed.
func TestBucketedCrashAfterPublishIsCommitted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, crashAt("after-publish"))
	id, l := e.bucketed("bcommit", 8, spec{total: 16, perPin: 5, perIP: 5})
	var pin string
	for n := 0; ; n++ {
		pin = fmt.Sprintf("gina-%d", n)
		if bucket.Home(pin, 8) != bucket.Home("10.6.0.1", 8) {
			break
		}
	}
	if r := e.grab(grabBody("k-2", pin, "10.6.0.1", id, 2)); r.status != http.StatusInternalServerError {
		t.Fatalf("the killed grab answered %d %s", r.status, r.raw)
	}
	if _, err := e.db.InsertFlows(context.Background(), e.pub.Events()); err != nil { // the flow sink's part
		t.Fatal(err)
	}
	e.pastDeadline()
	if st := e.reconcile(); st.Committed < 2 || st.Aborted != 0 || st.Published != 0 {
		t.Fatalf("reconcile: %+v, want every part committed and nothing owed", st)
	}
	remaining, pins, ips := e.buckets(id, l)
	if sum(remaining) != 14 || pins[pin] != 2 || ips["10.6.0.1"] != 2 {
		t.Fatalf("after reconcile: remaining %v, pin %d, ip %d", remaining, pins[pin], ips["10.6.0.1"])
	}
	if got := e.grantedFrom(id, l); got[bucket.Home(pin, 8)] != 2 {
		t.Fatalf("granted by bucket %v, want 2 from the pin's home", got)
	}
	if a := e.grab(grabBody("k-2", pin, "10.6.0.1", id, 2)); a.res.Result != grab.Granted {
		t.Fatalf("a replay after the reconciler: %d %s, want GRANTED", a.status, a.raw)
	}
}

// A resend of a bucketed grab takes where the claim says, never where its own
// instance would route it: while the claim is young (the first send may still be
// moving its takes) it waits, 503; after that it takes from the claim's bucket, so
// the index names the takes the ledgers hold and a cancel finds them.
func TestBucketedResendFollowsTheClaim(t *testing.T) {
	t.Parallel()
	first := newEnv(t, crashAt("after-claim"))
	second := newEnv(t)
	id, l := first.bucketed("bresend", 4, spec{total: 40, perPin: 5})
	// The first instance learns the layout (a detail page's status read teaches
	// it), so its claim names a bucket.
	if st, err := first.svc.Status(context.Background(), id, 1); err != nil || st.Remaining != 40 {
		t.Fatalf("status: %+v %v", st, err)
	}
	rid := first.rid("r")
	body := grabBody(rid, "hana", "10.9.0.2", id, 2)
	if a := first.send("POST", "/v1/grab", checkoutToken, nil, body); a.status != http.StatusInternalServerError {
		t.Fatalf("the crashed send answered %d %s", a.status, a.raw)
	}
	before, _, _ := second.buckets(id, l)
	a := second.send("POST", "/v1/grab", checkoutToken, nil, body)
	if a.status != http.StatusServiceUnavailable || a.res.Decision != grab.Undecided {
		t.Fatalf("a resend while the claim is young: %d %s, want 503 in flight", a.status, a.raw)
	}
	if now, _, _ := second.buckets(id, l); fmt.Sprint(now) != fmt.Sprint(before) {
		t.Fatalf("the waiting resend took: %v -> %v", before, now)
	}
	second.clock.Advance(second.cfg.AnswerTimeout + 2*time.Second)
	if a := second.send("POST", "/v1/grab", checkoutToken, nil, body); a.res.Result != grab.Granted {
		t.Fatalf("the resend after the claim's answer time: %d %s", a.status, a.raw)
	}
	if ev := second.pub.Events(); len(ev) != 1 || ev[0].Items[0].Bucket != bucket.Home("hana", 4) {
		t.Fatalf("events %+v, want one GRAB from the claim's bucket (the pin's home)", ev)
	}
	if c := second.send("POST", "/v1/grab/"+rid+"/cancel", checkoutToken, nil, map[string]any{"pin": "hana"}); c.res.Result != grab.Returned {
		t.Fatalf("cancel: %d %s", c.status, c.raw)
	}
	if after, pins, _ := second.buckets(id, l); fmt.Sprint(after) != fmt.Sprint(before) || pins["hana"] != 0 {
		t.Fatalf("after the cancel: %v (pin %d), want %v", after, pins["hana"], before)
	}
}

// A bucket with fewer units than a grab asks is not empty: a grab of 2 against
// buckets of 1 each is SOLD_OUT, and the grab of 1 after it is served, not told
// SOLD_OUT from a cache.
func TestBucketsWithSomeLeftAreNotSoldOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id, l := e.bucketed("bsplit", 4, spec{total: 4, perPin: 5, maxPerGrab: 2})
	if a := e.grab(grabBody("two", "ivy", "10.10.0.1", id, 2)); a.status != http.StatusConflict || a.res.Result != grab.SoldOut {
		t.Fatalf("2 of buckets holding 1 each: %d %s, want SOLD_OUT", a.status, a.raw)
	}
	if a := e.grab(grabBody("one", "ivy", "10.10.0.1", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("1 after it: %d %s, want GRANTED", a.status, a.raw)
	}
	if rem, _, _ := e.buckets(id, l); sum(rem) != 3 {
		t.Fatalf("remaining %v, want 3 in all", rem)
	}
}

// A bucketed promotion without an ip limit: a grab counts the ip nowhere, so one
// from the pin's home bucket is one part on one shard (no ledger entry, no count
// on the ip's home), and its GRAB says noIp so a cancel, the reconciler and the
// rebuild find the same parts. An ip limit set later is learned from the
// IP_PART_NEEDED the next grab meets: that grab counts the ip, and the limit binds.
func TestBucketedGrabWithoutAnIPLimitIsOnePart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const k = 4
	id, l := e.bucketed("bnoip", k, spec{total: 40, perPin: 5, maxPerGrab: 5})
	pin, ip := "dora", "10.9.0.1"
	home := bucket.Home(pin, k)
	for bucket.Home(promo.IPCounterKey(ip), k) == home { // an ip homed elsewhere, so a part there would show
		ip += "1"
	}
	ipHome := bucket.Home(promo.IPCounterKey(ip), k)
	ctx := context.Background()
	ledger := func(b int, rid string) bool {
		return e.shards[l.Shards[b]].HExists(ctx, promo.LedgerKey(l.Keys[b]), e.rid(rid)).Val()
	}

	// The first grab learns the layout (BUCKETED, no ip limit); the second is known.
	for n, rid := range []string{"n-1", "n-2"} {
		if a := e.grab(grabBody(rid, pin, ip, id, 1)); a.res.Result != grab.Granted {
			t.Fatalf("grab %s: %d %s", rid, a.status, a.raw)
		}
		ev := e.pub.Events()[n]
		if it := ev.Items[0]; !it.NoIP || it.Bucket != home || it.Buckets != k {
			t.Fatalf("grab %s's event item %+v: want noIp from bucket %d of %d", rid, it, home, k)
		}
		if !ledger(home, rid) || ledger(ipHome, rid) {
			t.Fatalf("grab %s: ledger on the pin's home %v, on the ip's home %v; want the pin's home alone", rid, ledger(home, rid), ledger(ipHome, rid))
		}
	}
	_, pins, ips := e.buckets(id, l)
	if pins[pin] != 2 || len(ips) != 0 {
		t.Fatalf("after two grabs: pin %d, ips %v; want 2 and none counted", pins[pin], ips)
	}
	if a := e.cancel("n-1", pin); a.res.Result != grab.Returned {
		t.Fatalf("cancel: %d %s", a.status, a.raw)
	}
	if _, pins, _ = e.buckets(id, l); pins[pin] != 1 {
		t.Fatalf("after the cancel: pin %d, want 1", pins[pin])
	}

	// An ip limit of 2 set on every bucket, as a PATCH does.
	for b, bk := range l.Keys {
		if err := e.shards[l.Shards[b]].HSet(ctx, bk, "perIp", 2).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if a := e.grab(grabBody("n-3", "ed", ip, id, 2)); a.res.Result != grab.Granted {
		t.Fatalf("grab after the limit: %d %s", a.status, a.raw)
	}
	if it := e.pub.Events()[len(e.pub.Events())-1].Items[0]; it.NoIP {
		t.Fatalf("a grab under an ip limit says noIp: %+v", it)
	}
	if _, _, ips = e.buckets(id, l); ips[promo.IPCounterKey(ip)] != 2 || !ledger(ipHome, "n-3") {
		t.Fatalf("after a grab under the limit: ips %v (home %d has its entry: %v); want %s at 2", ips, ipHome, ledger(ipHome, "n-3"), ip)
	}
	if a := e.grab(grabBody("n-4", "fay", ip, id, 1)); a.res.Result != grab.IPLimit {
		t.Fatalf("a third unit from the ip: %d %s, want IP_LIMIT", a.status, a.raw)
	}
}

// Killed after the take of a grab that counted its ip nowhere: the reconciler
// gives its one part back, and the CANCEL it owes says noIp, as the GRAB would
// have, so the record's ip sums leave both out.
func TestBucketedCrashWithoutAnIPLimitOwesANoIPCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, crashAt("after-take"))
	id, l := e.bucketed("bcrashn", 8, spec{total: 16, perPin: 5})
	if r := e.do("GET", "/v1/promotions/"+id+"/1/status", "", nil); r.status != http.StatusOK { // learns the layout, and that there is no ip limit
		t.Fatalf("status: %d %s", r.status, r.raw)
	}
	if r := e.grab(grabBody("kn-1", "gina", "10.5.0.9", id, 2)); r.status != http.StatusInternalServerError {
		t.Fatalf("the killed grab answered %d %s", r.status, r.raw)
	}
	remaining, pins, ips := e.buckets(id, l)
	if sum(remaining) != 14 || pins["gina"] != 2 || len(ips) != 0 {
		t.Fatalf("want the part open, the ip counted nowhere: remaining %v, pin %d, ips %v", remaining, pins["gina"], ips)
	}
	e.pastDeadline()
	if st := e.reconcile(); st.Published != 1 {
		t.Fatalf("reconcile: %+v, want one CANCEL", st)
	}
	evs := e.pub.Events()
	if len(evs) != 1 || evs[0].Kind != flow.Cancel || !evs[0].Items[0].NoIP || evs[0].Items[0].Buckets != 8 {
		t.Fatalf("events %+v, want one CANCEL of a bucket of 8 saying noIp", evs)
	}
	if remaining, pins, _ = e.buckets(id, l); sum(remaining) != 16 || pins["gina"] != 0 {
		t.Fatalf("after reconcile: remaining %v, pin %d", remaining, pins["gina"])
	}
}

// Redis calls per grant of a promotion in 8 buckets, with and without an ip limit
// (one too high to bind): without one a grab from its pin's home is one take, so
// it costs fewer calls than one whose ip is homed on another bucket. Calls are
// counted by the service's own metric, not timed.
func TestBucketedGrabWithoutAnIPLimitCostsFewerCalls(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(_ *grab.Config, d *grab.Deps) { d.Metrics = grab.NewMetrics(reg) })
	const k, grants = 8, 64
	perGrant := map[string]float64{}
	for _, c := range []struct {
		name  string
		perIP int64
	}{{"limited", 1_000}, {"free", 0}} {
		id, _ := e.bucketed("bcalls-"+c.name, k, spec{total: 1_000, perIP: c.perIP})
		if a := e.grab(grabBody("bc-learn-"+c.name, "learner", "10.20.0.1", id, 1)); a.res.Result != grab.Granted {
			t.Fatalf("%s: the first grab: %d %s", c.name, a.status, a.raw)
		}
		before := redisCalls(t, reg)
		for n := range grants {
			if a := e.grab(grabBody(fmt.Sprintf("bc-%s-%d", c.name, n), fmt.Sprintf("buyer-%d", n), fmt.Sprintf("10.20.1.%d", n), id, 1)); a.res.Result != grab.Granted {
				t.Fatalf("%s grab %d: %d %s", c.name, n, a.status, a.raw)
			}
		}
		perGrant[c.name] = (redisCalls(t, reg) - before) / grants
	}
	t.Logf("Redis calls per grant at %d buckets: ip limit %.2f, none %.2f", k, perGrant["limited"], perGrant["free"])
	if perGrant["free"] >= perGrant["limited"] {
		t.Fatalf("calls per grant without an ip limit %.2f, with one %.2f: want fewer without", perGrant["free"], perGrant["limited"])
	}
}
