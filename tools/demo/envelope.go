package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/stack"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/tools/checker"
	"github.com/flashsale/platform/tools/invariants"
	"github.com/flashsale/platform/tools/loadgen"
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

// poolView is the pool as promo-admin's GET shows it.
type poolView struct {
	Remaining, Granted int64
	Envelope           struct {
		Amount, MinAmount, RemainingAmount int64
	}
}

// sellPool creates the pool, lets the crowd grab it, returns a few envelopes and
// hands them out again, printing at each step what was granted against the budget
// and what promo-admin says is left.
func sellPool(ctx context.Context, st stack.File, client *http.Client, checkoutToken, adminToken, run string) (poolSale, error) {
	id := "envelopes-" + run
	d := &poolDemo{st: st, client: client, checkoutToken: checkoutToken, adminToken: adminToken, run: run, id: id,
		ps: poolSale{promo: checker.Promotion{PromoID: id, Type: 1, Total: poolEnvelopes, PerPin: 1, EnvelopeAmount: poolBudget}}}
	err := d.sell(ctx)
	return d.ps, err
}

// poolDemo is the pool's sale, told in stages; ps collects what each buyer was told.
type poolDemo struct {
	st                        stack.File
	client                    *http.Client
	checkoutToken, adminToken string
	run, id                   string
	ps                        poolSale
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
	body := map[string]any{"promoId": d.id, "type": 1, "title": "demo red envelopes", "total": poolEnvelopes, "perPinLimit": 1, "maxPerGrab": 1,
		"startAt": time.Now().UTC().Add(-time.Second).Format(time.RFC3339), "endAt": time.Now().UTC().Add(time.Hour).Format(time.RFC3339),
		"envelope": map[string]any{"amount": poolBudget, "minAmount": poolMin}}
	if a := loadgen.Do(ctx, d.client, d.st.Admin, loadgen.Call{Method: "POST", Path: "/v1/promotions", Body: body, Token: d.adminToken}); a.Status != http.StatusCreated {
		return fmt.Errorf("create the envelope pool %s: %d %s", d.id, a.Status, a.Body)
	}
	fmt.Printf("%d envelopes of at least %s sharing %s, split at create\n", poolEnvelopes, money(poolMin), money(poolBudget))
	return nil
}

// grabs sends n buyers from the from-th at the pool, concurrency at a time, and
// returns how many were granted and the amounts they drew.
func (d *poolDemo) grabs(ctx context.Context, from, n, concurrency int, label string) (granted int, sum int64) {
	gen := func(i int) loadgen.Call {
		i += from
		return loadgen.Call{Method: "POST", Path: "/v1/grab", Token: d.checkoutToken, Body: map[string]any{
			"requestId": fmt.Sprintf("demo-env-%s-%d", d.run, i), "pin": fmt.Sprintf("fan-%d", i), "ip": fmt.Sprintf("10.88.%d.%d", i/250%250, i%250+1),
			"items": []map[string]any{{"promoId": d.id, "type": 1, "num": 1}}}}
	}
	answers := loadgen.Run(ctx, loadgen.Config{BaseURL: d.st.Grab, Concurrency: concurrency, Calls: n, Label: label, KeepBodies: true}, gen, nil)
	for i, a := range answers {
		req := checker.Request{RequestID: fmt.Sprintf("demo-env-%s-%d", d.run, from+i), Pin: fmt.Sprintf("fan-%d", from+i),
			Items: []checker.Item{{PromoID: d.id, Type: 1, Num: 1}}, Grab: final(a)}
		req.IP = fmt.Sprintf("10.88.%d.%d", (from+i)/250%250, (from+i)%250+1)
		if req.Grab == "GRANTED" {
			req.Items[0].Amount = amountOf(a.Body)
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
	view, err := getPool(ctx, d.client, d.st.Admin, d.adminToken, d.id)
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
		a := loadgen.Do(ctx, d.client, d.st.Grab, loadgen.Call{Method: "POST", Token: d.checkoutToken,
			Path: "/v1/grab/" + r.RequestID + "/cancel", Body: map[string]any{"pin": r.Pin, "reason": "PAYMENT_EXPIRED"}})
		r.Cancel = final(a)
		if r.Cancel == "RETURNED" {
			r.Items[0].Returned = amountOf(a.Body)
			returned += r.Items[0].Returned
			cancelled++
		}
	}
	view, err := getPool(ctx, d.client, d.st.Admin, d.adminToken, d.id)
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
	view, err := getPool(ctx, d.client, d.st.Admin, d.adminToken, d.id)
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

func getPool(ctx context.Context, client *http.Client, admin, token, id string) (poolView, error) {
	var v poolView
	a := loadgen.Do(ctx, client, admin, loadgen.Call{Method: "GET", Path: "/v1/promotions/" + id + "/1", Token: token})
	if err := json.Unmarshal(a.Body, &v); err != nil || a.Status != http.StatusOK {
		return v, fmt.Errorf("get %s: %d %s", id, a.Status, a.Body)
	}
	return v, nil
}

// final is an answer as the checker reads it: a contract result, or Unknown for
// a transport error or a 5xx.
func final(a loadgen.Answer) string {
	if a.Status == 0 || a.Status >= 500 || a.Result == "" {
		return checker.Unknown
	}
	return a.Result
}

// amountOf is the amount the answer's one item carried (0 when none).
func amountOf(body []byte) int64 {
	var b struct {
		Items []struct {
			Amount int64 `json:"amount"`
		} `json:"items"`
	}
	if json.Unmarshal(body, &b) != nil || len(b.Items) == 0 {
		return 0
	}
	return b.Items[0].Amount
}

// money writes cents as yuan.
func money(cents int64) string { return fmt.Sprintf("¥%d.%02d", cents/100, cents%100) }
