package grab

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// landingRecord is the record of many requests while the flow sink catches up:
// request rid's GRAB lands at landed[rid] (unix ns; 0: not yet), and this view of
// the record sees it lag later, as an instance reading a MySQL replica behind
// another's does. So instances decide the same request at once on different
// answers.
type landingRecord struct {
	landed map[string]*atomic.Int64
	items  map[string][]flow.Item
	lag    time.Duration
}

func (r *landingRecord) Granted(_ context.Context, rid, _ string, _ int) (bool, error) {
	at := r.landed[rid].Load()
	return at != 0 && time.Since(time.Unix(0, at)) >= r.lag, nil
}

func (r *landingRecord) GrabItems(_ context.Context, rid string) (string, string, []flow.Item, error) {
	return "p-" + rid, "10.0.0.1", r.items[rid], nil
}

// Three grab-service instances reconcile the same open grabs at once, while their
// GRABs land in the record one by one, each instance seeing them land at another
// moment: every grab still ends granted on all its
// shards or returned on all, a grab the killed process had committed somewhere ends
// granted, one with a take never made ends returned, and each promotion's stock
// is its total less the grabs granted on it. Whichever instance reaches a
// request's anchor first decides it; the other's commit or abort of the anchor is
// refused (commit.lua and return.lua are atomic per shard), and it follows.
func TestConcurrentReconcilersSettleEachGrabAsAWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, shards := privateShards(t)
	const total, requests = 1000, 120
	onShards := []int{0, 4, 9, 12}
	keys := createOnShards(t, c, "two-", onShards, total)
	rng := rand.New(rand.NewPCG(7, 11))
	rec := landingRecord{landed: map[string]*atomic.Int64{}, items: map[string][]flow.Item{}}
	type open struct {
		rid       string
		keys      []string
		committed bool // the killed process committed one take
		neverMade bool // it was killed before its last take
	}
	var grabs []*open
	// Takes come due over the run in no order, so an instance often reaches a
	// request by a take other than its anchor while another instance settles it.
	// The run starts at start, a second from now, once the grabs are written: the
	// instances' clock reads start when the run begins, however long the writes took.
	start := time.Now().Add(time.Second)
	spread := func(int) time.Time { return start.Add(time.Duration(rng.IntN(300)) * time.Millisecond) }
	for i := range requests {
		g := &open{rid: "two-" + strconv.Itoa(i)}
		perm := rng.Perm(len(keys))[:2+rng.IntN(2)]
		for _, k := range perm {
			g.keys = append(g.keys, keys[k])
		}
		var missing []int
		switch rng.IntN(6) {
		case 0:
			missing = []int{len(g.keys) - 1}
			g.neverMade = true
		case 1:
			g.committed = true
		}
		rec.items[g.rid] = openTakes(t, c, g.rid, "p-"+g.rid, g.keys, missing, spread)
		if g.committed {
			mustCommit(t, c, g.rid, g.keys[rng.IntN(len(g.keys))])
		}
		rec.landed[g.rid] = &atomic.Int64{}
		grabs = append(grabs, g)
	}

	time.Sleep(time.Until(start))
	run := time.Now()
	// The record catches up in a random order while the instances run passes.
	landing := make(chan struct{})
	go func() {
		defer close(landing)
		for _, i := range rng.Perm(requests) {
			if !grabs[i].neverMade { // a grab killed before its last take never sent its GRAB
				rec.landed[grabs[i].rid].Store(time.Now().UnixNano())
			}
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		}
	}()
	margin := Defaults().ReconcileMargin
	clock := func() time.Time { return start.Add(time.Since(run)).Add(margin) }
	var wg sync.WaitGroup
	for i := range 3 {
		view := rec
		view.lag = time.Duration(i) * 20 * time.Millisecond
		svc := reconciler(t, shards, &view, clock, nil)
		wg.Go(func() {
			for done := false; !done; {
				select {
				case <-landing:
					done = time.Since(run) > 400*time.Millisecond // every take due, every view caught up
				default:
				}
				if _, err := svc.Reconcile(ctx); err != nil {
					t.Errorf("pass: %v", err)
					return
				}
			}
			if _, err := svc.Reconcile(ctx); err != nil { // the CANCELs owed by the last aborts
				t.Errorf("last pass: %v", err)
			}
		})
	}
	wg.Wait()

	granted := map[string]int64{}
	byRecord := 0 // grabs granted by the record alone (no take committed)
	for _, g := range grabs {
		var states []string
		for _, key := range g.keys {
			e, found, err := lua.ReadLedger(ctx, c, key, g.rid)
			switch {
			case err != nil:
				t.Fatal(err)
			case found:
				states = append(states, e.State)
			}
		}
		allGranted := !slices.ContainsFunc(states, func(s string) bool { return s != lua.LedgerCommitted })
		allReturned := !slices.ContainsFunc(states, func(s string) bool { return s != lua.LedgerAbortRecorded && s != lua.LedgerReturned })
		switch {
		case !allGranted && !allReturned:
			t.Errorf("%s: takes %v on %v: neither all granted nor all returned (and their CANCELs paid)", g.rid, states, g.keys)
		case g.committed && !allGranted:
			t.Errorf("%s: a take was committed by the killed process, yet the grab ended returned: %v", g.rid, states)
		case g.neverMade && !allReturned:
			t.Errorf("%s: a take was never made, yet the grab ended granted: %v", g.rid, states)
		case allGranted:
			for _, key := range g.keys {
				granted[key]++
			}
			if !g.committed {
				byRecord++
			}
		}
	}
	if byRecord == 0 {
		t.Error("no grab was granted by the record: the run decided nothing but rollbacks")
	}
	for _, key := range keys {
		remaining, err := c.HGet(ctx, key, "remaining").Int64()
		if want := total - granted[key]; err != nil || remaining != want {
			t.Errorf("%s: remaining %d (%v), want %d (%d grabs granted on it)", key, remaining, err, want, granted[key])
		}
		if n := c.ZCard(ctx, promo.PendingKey(key)).Val(); n != 0 {
			t.Errorf("%s: %d takes still open or owing a CANCEL", key, n)
		}
	}
}
