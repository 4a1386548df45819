package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/flashsale/platform/client"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/tools/loadgen"
)

// admin creates and deletes the benchmark's promotions through promo-admin, with
// the platform's client (client/), so they are in the record like any other;
// every one made is deleted at the end.
type admin struct {
	c    *client.Admin
	err  error    // making c, returned by every call
	made []string // promo ids, type 1
}

const unlimited = promo.MaxTotal // stock that never runs out in one run

func newAdmin(base, token string) *admin {
	c, err := client.NewAdmin(client.Config{BaseURL: base, Token: token, AttemptTimeout: 30 * time.Second, UserAgent: "flashsale-bench"})
	return &admin{c: c, err: err}
}

// create makes an active single-unit-per-grab promotion without pin or ip limits.
func (a *admin) create(ctx context.Context, id string, total int64) error {
	return a.createIn(ctx, id, total, 1, nil)
}

// createIn is create in k buckets, with extra fields of the create body (by
// their JSON names, as api/openapi.yaml's PromotionSpec spells them).
func (a *admin) createIn(ctx context.Context, id string, total int64, k int, extra map[string]any) error {
	if a.err != nil {
		return a.err
	}
	now := time.Now().UTC().Truncate(time.Second)
	spec := client.PromotionSpec{PromoID: id, Type: 1, Title: "bench " + id, Total: total, MaxPerGrab: 1, Buckets: k,
		StartAt: now.Add(-time.Minute), EndAt: now.Add(2 * time.Hour)}
	spec, err := withFields(spec, extra)
	if err != nil {
		return fmt.Errorf("create promotion %s: %w", id, err)
	}
	if _, err := a.c.Create(ctx, spec); err != nil {
		return fmt.Errorf("create promotion %s: %w", id, err)
	}
	a.made = append(a.made, id)
	return nil
}

// withFields sets spec's fields named in extra, refusing a name the spec does not have.
func withFields(spec client.PromotionSpec, extra map[string]any) (client.PromotionSpec, error) {
	if len(extra) == 0 {
		return spec, nil
	}
	b, err := json.Marshal(extra)
	if err != nil {
		return spec, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, fmt.Errorf("extra fields %s: %w", b, err)
	}
	return spec, nil
}

// remove deletes one promotion (its five keys leave Redis, so no take of it is
// left for the reconciler); one not found is gone already.
func (a *admin) remove(ctx context.Context, id string) error {
	if a.err != nil {
		return a.err
	}
	if err := a.c.Delete(ctx, id, 1); err != nil && client.CodeOf(err) != client.CodeNotFound {
		return fmt.Errorf("delete promotion %s: %w", id, err)
	}
	for i, m := range a.made {
		if m == id {
			a.made = append(a.made[:i], a.made[i+1:]...)
			break
		}
	}
	return nil
}

// cleanup deletes every promotion still standing.
func (a *admin) cleanup(ctx context.Context) []error {
	var errs []error
	for _, id := range append([]string(nil), a.made...) {
		if err := a.remove(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// idsOnShards returns n promotion ids named prefix-<k>, perShard of them on each
// shard in shards (the contract's ring decides where an id lives).
func idsOnShards(prefix string, shards []int, perShard int) []string {
	want := map[int]int{}
	for _, s := range shards {
		want[s] = perShard
	}
	var out []string
	for k := 0; len(out) < len(shards)*perShard && k < 1_000_000; k++ {
		id := prefix + "-" + strconv.Itoa(k)
		s := ring.Default.Shard(promo.Key(id, 1))
		if want[s] > 0 {
			want[s]--
			out = append(out, id)
		}
	}
	return out
}

func shardOf(id string) int { return ring.Default.Shard(promo.Key(id, 1)) }

// grabCall is one single-item grab of promotion id by buyer n: a new requestId every
// call, pins and ips drawn from large pools (the promotions have no limits).
// grabCall is the n-th grab of a run: a requestId never sent before, so it says
// it is the first attempt, as the checkout service says of a buyer's first press.
func grabCall(token, run, id string, n int64) loadgen.Call {
	return grabCallIDs(token, run, id, n, randomRequestIDs)
}

// grabCallIDs is grabCall with its requestId sent as it comes (random) or derived
// beside its promotion, whatever --random-request-ids says.
func grabCallIDs(token, run, id string, n int64, random bool) loadgen.Call {
	body := grabBody(run, id, n, random)
	return loadgen.Call{Method: "POST", Path: "/v1/grab", Token: token, Body: body, Attempt: 1}
}

// grabBody is built by hand: the load generator shares the cores with the service,
// so it spends as little as it can per request (loadgen sends a []byte as it is).
func grabBody(run, id string, n int64, random bool) []byte {
	return buyerBody(run, id, n, n%pinPool, n, "198.18.", random) // RFC 2544's benchmarking range: only a field in the body
}

// buyerBody is the body of grab n of a run: one unit of promotion id by pin
// p<pin> from ip <net><ipn/250 mod 250>.<ipn mod 250 + 1>; its requestId as it
// comes when random, derived beside the promotion otherwise.
func buyerBody(run, id string, n, pin, ipn int64, net string, random bool) []byte {
	return buyerBodyIn(run, id, 1, n, pin, ipn, net, random)
}

// buyerBodyIn is buyerBody for a promotion in k buckets: its requestId derived
// beside the pin's home bucket, as a checkout following docs/CONTRACT.md does.
func buyerBodyIn(run, id string, k int, n, pin, ipn int64, net string, random bool) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"requestId":"`...)
	rid := run + "-" + strconv.FormatInt(n, 10)
	pinName := "p" + strconv.FormatInt(pin, 10)
	if !random {
		rid = client.RequestIDBesideBucket(rid, id, 1, k, pinName)
	}
	b = append(b, rid...)
	b = append(b, `","pin":"`...)
	b = append(b, pinName...)
	b = append(b, `","ip":"`...)
	b = append(b, net...)
	b = strconv.AppendInt(b, (ipn/250)%250, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, ipn%250+1, 10)
	b = append(b, `","items":[{"promoId":"`...)
	b = append(b, id...)
	b = append(b, `","type":1,"num":1}]}`...)
	return b
}

// randomRequestIDs (--random-request-ids) sends requestIds as they come. By
// default the bench derives them beside the grab's promotion, as a checkout
// service following docs/CONTRACT.md ("A requestId beside its promotion") does.
var randomRequestIDs bool

// pinPool is the size of the buyer pool: many pins, each grabbing now and then.
const pinPool = 100_000
