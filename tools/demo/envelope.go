package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/client"
	"github.com/flashsale/platform/internal/stack"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/tools/checker"
	"github.com/flashsale/platform/tools/invariants"
)

// The demo's envelope pool (docs/CONTRACT.md, "Envelope pools"): poolEnvelopes
// red envelopes sharing poolBudget (in cents), each at least poolMin, grabbed by
// poolCrowd fans at once; poolCancels of them give theirs back and as many
// latecomers draw them again.
const (
	poolEnvelopes = 500
	poolBudget    = 88_888_88 // ¥88,888.88
	poolMin       = 1_00
	poolCrowd     = 700
	poolCancels   = 20
)

// poolSale is what the pool's buyers were told, for the checker.
type poolSale struct {
	promo checker.Promotion
	reqs  []checker.Request
}

// sellPool creates the pool, lets the crowd grab it, returns a few envelopes and
// hands them out again, printing at each step what was granted against the budget
// and what promo-admin says is left.
func sellPool(ctx context.Context, pf platform, run string) (poolSale, error) {
	id := "envelopes-" + run
	d := &poolDemo{pf: pf, run: run, id: id,
		ps: poolSale{promo: checker.Promotion{PromoID: id, Type: 1, Total: poolEnvelopes, PerPin: 1, EnvelopeAmount: poolBudget}}}
	err := d.sell(ctx)
	return d.ps, err
}

// poolDemo is the pool's sale, told in stages; ps collects what each buyer was told.
type poolDemo struct {
	pf      platform
	run, id string
	ps      poolSale
}

func (d *poolDemo) sell(ctx context.Context) error {
	if err := d.create(ctx); err != nil {
		return err
	}
	if err := d.crowd(ctx); err != nil {
		return err
	}
	cancelled, returned, err := d.cancelSome(ctx)
	if err != nil {
		return err
	}
	return d.latecomers(ctx, cancelled, returned)
}

// create creates the pool through promo-admin.
func (d *poolDemo) create(ctx context.Context) error {
	spec := client.PromotionSpec{PromoID: d.id, Type: 1, Title: "demo red envelopes", Total: poolEnvelopes, PerPinLimit: 1, MaxPerGrab: 1,
		Envelope: &client.EnvelopeSpec{Amount: poolBudget, MinAmount: poolMin}}
	if err := d.pf.create(ctx, spec); err != nil {
		return fmt.Errorf("the envelope pool: %w", err)
	}
	fmt.Printf("%d envelopes of at least %s sharing %s, split at create\n", poolEnvelopes, money(poolMin), money(poolBudget))
	return nil
}

// grabs sends n buyers from the from-th at the pool, concurrency at a time, and
// returns how many were granted and the amounts they drew.
func (d *poolDemo) grabs(ctx context.Context, from, n, concurrency int, label string) (granted int, sum int64) {
	fan := func(i int) client.GrabRequest {
		i += from
		return client.GrabRequest{RequestID: fmt.Sprintf("demo-env-%s-%d", d.run, i), Pin: fmt.Sprintf("fan-%d", i), IP: fmt.Sprintf("10.88.%d.%d", i/250%250, i%250+1),
			Items: []client.Item{{PromoID: d.id, Type: 1, Num: 1}}}
	}
	_, tolds := d.pf.crowd(ctx, n, concurrency, label, fan)
	for i, t := range tolds {
		req := checker.Request{RequestID: fmt.Sprintf("demo-env-%s-%d", d.run, from+i), Pin: fmt.Sprintf("fan-%d", from+i),
			Items: []checker.Item{{PromoID: d.id, Type: 1, Num: 1}}, Grab: t.result}
		req.IP = fmt.Sprintf("10.88.%d.%d", (from+i)/250%250, (from+i)%250+1)
		if req.Grab == "GRANTED" {
			req.Items[0].Amount = t.amount()
			granted++
			sum += req.Items[0].Amount
		}
		d.ps.reqs = append(d.ps.reqs, req)
	}
	return granted, sum
}

// crowd lets the fans draw every envelope: the amounts must sum to the budget.
func (d *poolDemo) crowd(ctx context.Context) error {
	granted, sum := d.grabs(ctx, 0, poolCrowd, 100, "fans")
	view, err := d.pool(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("%d fans: %d envelopes granted, their amounts sum to %s of the budget %s; remainingAmount %s\n",
		poolCrowd, granted, money(sum), money(poolBudget), money(view.Envelope.RemainingAmount))
	if granted != poolEnvelopes || sum != poolBudget || view.Envelope.RemainingAmount != 0 {
		return fmt.Errorf("the pool granted %d envelopes worth %s with %s left, want all %d worth exactly %s",
			granted, money(sum), money(view.Envelope.RemainingAmount), poolEnvelopes, money(poolBudget))
	}
	return nil
}

// cancelSome cancels poolCancels unpaid envelopes: the pool must show them back.
func (d *poolDemo) cancelSome(ctx context.Context) (cancelled int, returned int64, err error) {
	for i := range d.ps.reqs {
		r := &d.ps.reqs[i]
		if cancelled == poolCancels {
			break
		}
		if r.Grab != "GRANTED" {
			continue
		}
		t := d.pf.cancel(ctx, r.RequestID, r.Pin)
		r.Cancel = t.result
		if r.Cancel == "RETURNED" {
			r.Items[0].Returned = t.amount()
			returned += r.Items[0].Returned
			cancelled++
		}
	}
	view, err := d.pool(ctx)
	if err != nil {
		return cancelled, returned, err
	}
	fmt.Printf("%d unpaid envelopes cancelled, %s given back; remainingAmount %s, %d envelopes left\n",
		cancelled, money(returned), money(view.Envelope.RemainingAmount), view.Remaining)
	if view.Envelope.RemainingAmount != returned || view.Remaining != int64(cancelled) {
		return cancelled, returned, fmt.Errorf("after %d cancels giving back %s the pool shows %d envelopes worth %s left",
			cancelled, money(returned), view.Remaining, money(view.Envelope.RemainingAmount))
	}
	return cancelled, returned, nil
}

// latecomers draw what the cancels gave back, exactly.
func (d *poolDemo) latecomers(ctx context.Context, cancelled int, returned int64) error {
	regranted, resum := d.grabs(ctx, poolCrowd, poolCancels+10, 10, "")
	view, err := d.pool(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("%d latecomers: %d envelopes granted again, worth %s (what the cancels gave back); remainingAmount %s\n",
		poolCancels+10, regranted, money(resum), money(view.Envelope.RemainingAmount))
	if regranted != cancelled || resum != returned || view.Envelope.RemainingAmount != 0 {
		return fmt.Errorf("the latecomers drew %d envelopes worth %s of the %d worth %s given back", regranted, money(resum), cancelled, money(returned))
	}
	return nil
}

// checkPool checks invariant 7 on the pool (and 1 to 4 on its units) with the
// fault drills' checker: Redis, the record and the buyers' answers, to the cent.
func checkPool(ctx context.Context, st stack.File, shards []*redis.Client, db *store.Store, ps poolSale) invariants.Result {
	src := checker.Sources{DB: db.DB(), Brokers: st.Kafka}
	for _, s := range shards {
		src.Shards = append(src.Shards, s)
	}
	promos := []checker.Promotion{ps.promo}
	if err := src.Settle(ctx, promos, 30*time.Second); err != nil {
		return invariants.Result{Name: "7 envelopes handed once", Detail: "not settled: " + err.Error()}
	}
	snap, err := src.Read(ctx, promos)
	if err != nil {
		return invariants.Result{Name: "7 envelopes handed once", Detail: err.Error()}
	}
	rep := checker.Verify(promos, ps.reqs, snap)
	detail := rep.Summary()
	if len(rep.Findings) > 0 {
		detail += "; " + rep.Findings[0]
	}
	return invariants.Result{Name: "7 envelopes handed once", Pass: !rep.Failed(), Detail: detail}
}

// pool reads the pool as promo-admin shows it, live from its shard.
func (d *poolDemo) pool(ctx context.Context) (*client.Promotion, error) {
	p, err := d.pf.admin.Get(ctx, d.id, 1)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", d.id, err)
	}
	if p.Envelope == nil {
		return nil, fmt.Errorf("get %s: not an envelope pool", d.id)
	}
	return p, nil
}

// money writes cents as yuan.
func money(cents int64) string { return fmt.Sprintf("¥%d.%02d", cents/100, cents%100) }
