package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/client"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/tools/checker"
)

// heldGrab is a held grant of the holds canary: its hold's deadline on the shard
// (unix ms), or 0 once confirmed.
type heldGrab struct {
	rid, pin string
	until    float64
}

// holdsCanary grants held grabs whose request index entries (and so their holds)
// live on shard, from a promotion of their own, and confirms every other one: what
// a lost shard must get back is the open ones, at their deadlines, and no other.
func (d *drillEnv) holdsCanary(ctx context.Context, shard int, out *outcome) []heldGrab {
	canary := checker.Promotion{PromoID: d.run + "-holds", Type: 1, Total: 100, PerPin: 1, PerIP: 100}
	if !d.createCanary(ctx, canary, 1, "drill holds canary", out) {
		return nil
	}
	var held []heldGrab
	for i := 0; len(held) < 6; i++ {
		rid := fmt.Sprintf("%s-hold-%d", d.run, i)
		if ringShard(promo.RequestIndexKey(rid)) != shard {
			continue
		}
		g := heldGrab{rid: rid, pin: fmt.Sprintf("%s-hold-pin-%d", d.run, len(held))}
		req := &checker.Request{RequestID: rid, Pin: g.pin, IP: "10.97.0.1", Items: []checker.Item{{PromoID: canary.PromoID, Type: 1, Num: 1}},
			Grab: checker.Unknown, Sent: time.Now()}
		d.load.track(req) // the checker accounts for it as for the load's grabs
		grab := grabRequest(req, false)
		grab.HoldSeconds = 3600
		gctx, cancel := context.WithTimeout(ctx, d.load.budget)
		ans, err := d.load.grabs.Grab(gctx, grab)
		cancel()
		a, _ := final(ans, err)
		d.load.update(req, func(r *checker.Request) { r.Grab, r.Done = a.result, time.Now() })
		if err != nil {
			out.fail("holds canary: held grab %s: %v", rid, err)
			return nil
		}
		if g.until, err = d.shards[shard].ZScore(ctx, promo.HoldsKey, rid).Result(); err != nil {
			out.fail("holds canary: the hold of %s on shard %d: %v", rid, shard, err)
			return nil
		}
		if len(held)%2 == 1 {
			err := d.confirm(ctx, g)
			d.load.update(req, func(r *checker.Request) { r.Done = time.Now() })
			if err != nil {
				out.fail("holds canary: confirm of %s: %v", rid, err)
				return nil
			}
			g.until = 0
		}
		held = append(held, g)
	}
	return held
}

// confirm confirms the held grant g through the checkout client: nil once CONFIRMED.
func (d *drillEnv) confirm(ctx context.Context, g heldGrab) error {
	ctx, cancel := context.WithTimeout(ctx, d.load.budget)
	defer cancel()
	ans, err := d.load.grabs.Confirm(ctx, g.rid, g.pin)
	if err == nil && ans.Result != client.ResultConfirmed {
		err = fmt.Errorf("answered %s", ans.Result)
	}
	return err
}

// checkHolds, after shard's rebuild: the open holds are back at their deadlines,
// the confirmed ones are not, and an open one confirms now (CONFIRMED, its hold
// gone).
func (d *drillEnv) checkHolds(ctx context.Context, shard int, held []heldGrab, out *outcome) {
	var open *heldGrab
	for i, g := range held {
		until, err := d.shards[shard].ZScore(ctx, promo.HoldsKey, g.rid).Result()
		switch {
		case g.until == 0 && !errors.Is(err, redis.Nil):
			out.fail("the rebuild put back the hold of %s, which was confirmed (deadline %v, err %v)", g.rid, until, err)
		case g.until != 0 && (err != nil || until != g.until):
			out.fail("the rebuild gave the open hold of %s deadline %v (err %v), want %v", g.rid, until, err, g.until)
		case g.until != 0:
			open = &held[i]
		}
	}
	if open == nil {
		return
	}
	if err := d.confirm(ctx, *open); err != nil {
		out.fail("confirm of %s after the rebuild: %v", open.rid, err)
	} else if err := d.shards[shard].ZScore(ctx, promo.HoldsKey, open.rid).Err(); !errors.Is(err, redis.Nil) {
		out.fail("the hold of %s stayed after its confirm (%v)", open.rid, err)
	}
	out.note("shard %d: %d open holds back at their deadlines, %d confirmed ones not", shard, (len(held)+1)/2, len(held)/2)
}
