package grabtransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
)

// grabAs sends body under requestId rid as it is (e.grab would make it unique to
// the run by a suffix, which moves its index entry to another shard).
func (e *env) grabAs(rid string, body map[string]any) answer {
	body["requestId"] = rid
	return e.send("POST", "/v1/grab", checkoutToken, nil, body)
}

// indexEntry is requestId rid's request index entry, found false when there is none.
func (e *env) indexEntry(rid string) (idx flow.RequestIndex, found bool) {
	e.t.Helper()
	key := promo.RequestIndexKey(rid)
	raw, err := e.shard(key).Get(context.Background(), key).Bytes()
	if err != nil {
		return idx, false
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		e.t.Fatalf("index entry of %s: %v", rid, err)
	}
	return idx, true
}

// A grab whose requestId the ring places beside its one promotion is claimed in the
// take's own q.lua call. The claim is there with the grant and a cancel finds it; a
// resend and a reuse go the usual way and answer as ever; a refused grab leaves no
// claim; and under concurrency the stock sells exactly, every grant claimed.
func TestAClaimMadeWithTheTake(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(_ *grab.Config, d *grab.Deps) { d.Metrics = grab.NewMetrics(reg) })
	claims := func(how string) float64 { return counter(t, reg, "flashsale_grab_claims_total", how) }
	id := e.promotion("fold", spec{total: 40, perPin: 1})
	key := promo.Key(id, 1)
	beside := func(base string) string { return promo.RequestIDBeside(e.rid(base), key) }

	rid := beside("first")
	folded, apart := claims("folded"), claims("apart")
	if a := e.grabAs(rid, grabBody("", "ann", "10.0.0.1", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("the grab: %d %s", a.status, a.raw)
	}
	if claims("folded") != folded+1 || claims("apart") != apart {
		t.Fatalf("claims folded %v -> %v, apart %v -> %v: want one folded", folded, claims("folded"), apart, claims("apart"))
	}
	if idx, found := e.indexEntry(rid); !found || idx.Pin != "ann" || len(idx.Items) != 1 || idx.Items[0].PromoID != id {
		t.Fatalf("the claim after the grant: %+v found %v", idx, found)
	}
	if a := e.grabAs(rid, grabBody("", "ann", "10.0.0.1", id, 1)); a.res.Result != grab.Granted {
		t.Errorf("a resend: %d %s, want the grant replayed", a.status, a.raw)
	}
	if a := e.grabAs(rid, grabBody("", "ann", "10.0.0.1", id, 2)); a.res.Result != grab.RequestIDReused {
		t.Errorf("another body under the requestId: %d %s, want REQUEST_ID_REUSED", a.status, a.raw)
	}
	if a := e.do("POST", "/v1/grab/"+rid+"/cancel", checkoutToken, map[string]any{"pin": "ann"}); a.status != http.StatusOK {
		t.Errorf("the cancel: %d %s", a.status, a.raw)
	}

	limited := beside("over-limit")
	if a := e.grabAs(beside("bob-1"), grabBody("", "bob", "10.0.0.2", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("bob's first grab: %d %s", a.status, a.raw)
	}
	if a := e.grabAs(limited, grabBody("", "bob", "10.0.0.2", id, 1)); a.res.Result != grab.PinLimit {
		t.Fatalf("bob's second grab: %d %s, want PIN_LIMIT", a.status, a.raw)
	}
	if _, found := e.indexEntry(limited); found {
		t.Error("a refused grab left its claim behind")
	}

	// The rest of the stock to a crowd, every requestId beside the promotion.
	left := e.hash(id).Remaining
	const buyers = 120
	results := make([]grab.Outcome, buyers)
	rids := make([]string, buyers)
	var wg sync.WaitGroup
	for i := range buyers {
		rids[i] = beside(fmt.Sprintf("crowd-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.grabAs(rids[i], grabBody("", fmt.Sprintf("c%d", i), "10.0.1.1", id, 1)).res.Result
		}()
	}
	wg.Wait()
	granted := 0
	for i, r := range results {
		_, found := e.indexEntry(rids[i])
		switch {
		case r == grab.Granted:
			granted++
			if !found {
				t.Errorf("%s granted without its claim", rids[i])
			}
		case r != grab.SoldOut:
			t.Errorf("%s: %s, want GRANTED or SOLD_OUT", rids[i], r)
		case found:
			t.Errorf("%s refused but claimed", rids[i])
		}
	}
	if int64(granted) != left || e.hash(id).Remaining != 0 {
		t.Errorf("%d granted of %d left, %d remaining", granted, left, e.hash(id).Remaining)
	}
}

// A grab of a promotion in buckets, with no ip limit, whose requestId the ring
// places beside its pin's home bucket, is claimed in its take's own call too: the
// claim names the home bucket and a cancel finds it. When the home is sold out the
// grab goes again with its claim made apart and falls over, and its claim names
// the bucket it took from.
func TestABucketedClaimMadeWithTheTake(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(_ *grab.Config, d *grab.Deps) { d.Metrics = grab.NewMetrics(reg) })
	claims := func(how string) float64 { return counter(t, reg, "flashsale_grab_claims_total", how) }
	const k = 4
	id, l := e.bucketed("bfold", k, spec{total: 4 * k, perPin: 1})
	beside := func(base, pin string) string {
		return promo.RequestIDBeside(e.rid(base), l.Keys[bucket.Home(pin, k)])
	}
	// The first grab learns the layout (BUCKETED), so it claims apart.
	if a := e.grabAs(e.rid("learn"), grabBody("", "learner", "10.0.0.9", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("the first grab: %d %s", a.status, a.raw)
	}
	// Pins of one home, h: its four units go to the first four.
	var pins []string
	for i := 0; len(pins) < 6; i++ {
		if pin := fmt.Sprint("b", i); bucket.Home(pin, k) == bucket.Home("b0", k) && bucket.Home(pin, k) != bucket.Home("learner", k) {
			pins = append(pins, pin)
		} else if i > 10_000 {
			t.Skip("no home without the learner's among the first pins")
		}
	}
	h := bucket.Home(pins[0], k)
	for i, pin := range pins[:4] {
		rid := beside(fmt.Sprint("home-", i), pin)
		folded, apart := claims("folded"), claims("apart")
		if a := e.grabAs(rid, grabBody("", pin, "10.0.0.1", id, 1)); a.res.Result != grab.Granted {
			t.Fatalf("grab %d from its home: %d %s", i, a.status, a.raw)
		}
		if claims("folded") != folded+1 || claims("apart") != apart {
			t.Fatalf("grab %d: claims folded %v -> %v, apart %v -> %v: want one folded", i, folded, claims("folded"), apart, claims("apart"))
		}
		if idx, found := e.indexEntry(rid); !found || len(idx.Items) != 1 || idx.Items[0].Bucket != h || idx.Items[0].Buckets != k || !idx.Items[0].NoIP {
			t.Fatalf("grab %d's claim: %+v found %v, want bucket %d of %d, noIp", i, idx, found, h, k)
		}
	}
	if a := e.do("POST", "/v1/grab/"+beside("home-0", pins[0])+"/cancel", checkoutToken, map[string]any{"pin": pins[0]}); a.status != http.StatusOK {
		t.Fatalf("the cancel of a folded bucketed grant: %d %s", a.status, a.raw)
	}
	// The cancel gave a unit back to h: one more from home, then h is empty.
	if a := e.grabAs(beside("home-4", pins[4]), grabBody("", pins[4], "10.0.0.1", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("the grab after the cancel: %d %s", a.status, a.raw)
	}
	rid := beside("over", pins[5])
	apart := claims("apart")
	if a := e.grabAs(rid, grabBody("", pins[5], "10.0.0.1", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("the grab whose home is sold out: %d %s", a.status, a.raw)
	}
	if claims("apart") != apart+1 {
		t.Errorf("the fall-over's claim: apart %v -> %v, want one more", apart, claims("apart"))
	}
	if idx, found := e.indexEntry(rid); !found || len(idx.Items) != 1 || idx.Items[0].Bucket == h {
		t.Fatalf("the fall-over's claim: %+v found %v, want another bucket than %d", idx, found, h)
	}
	if rem, _, _ := e.buckets(id, l); rem[h] != 0 {
		t.Errorf("home bucket %d has %d left, want 0: %v", h, rem[h], rem)
	}
}
