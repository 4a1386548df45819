package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/tools/checker"
	"github.com/flashsale/platform/tools/loadgen"
)

// kind is the shape of a drill promotion.
type kind int

const (
	hot   kind = iota // little stock, tight limits: sells out and lives on cancels
	big               // plenty of stock, per-pin and per-ip limits that bind
	rated             // a promotion-level rate window that binds
)

// sale is one drill promotion.
type sale struct {
	checker.Promotion
	kind      kind
	rateLimit int64
}

// round is the set of promotions one drill sells: one of each kind on every shard,
// one hot promotion in buckets across drillBuckets shards, and one envelope pool.
type round struct {
	name     string
	sales    []sale
	hot      []sale
	other    []sale
	bucketed sale
	pool     sale
}

// drillBuckets is the bucket count of each round's bucketed hot promotion.
const drillBuckets = 8

// Each round's envelope pool: poolEnvelopes envelopes of at least poolMinAmount,
// worth poolMeanAmount each on average (docs/CONTRACT.md, "Envelope pools").
const (
	poolEnvelopes  = 120
	poolMinAmount  = 100
	poolMeanAmount = 500
)

// newRound creates a round's promotions through promo-admin: for every shard 0..15
// one hot, one big and one rate-limited promotion, the bucketed hot one, and an
// envelope pool on poolShard (the shard the Redis drills lose, so a pool is rebuilt).
func newRound(ctx context.Context, admin, token, run, name string, hotTotal int64, poolShard int) (*round, error) {
	m := roundMaker{ctx: ctx, client: loadgen.Client(4, 10*time.Second), admin: admin, token: token, run: run, name: name,
		start: time.Now().UTC().Add(-5 * time.Second).Format(time.RFC3339), end: time.Now().UTC().Add(6 * time.Hour).Format(time.RFC3339)}
	r := &round{name: name}
	if err := m.shardSales(r, hotTotal); err != nil {
		return nil, err
	}
	b, err := m.bucketed(hotTotal)
	if err != nil {
		return nil, err
	}
	r.sales, r.bucketed = append(r.sales, b), b
	pool, err := m.pool(poolShard)
	if err != nil {
		return nil, err
	}
	r.sales, r.pool = append(r.sales, pool), pool
	return r, nil
}

// roundMaker creates one round's promotions, all on sale from start to end.
type roundMaker struct {
	ctx                     context.Context
	client                  *http.Client
	admin, token, run, name string
	start, end              string
}

// create posts one promotion to promo-admin; what names it in the error.
func (m roundMaker) create(body map[string]any, what string) error {
	a := loadgen.Do(m.ctx, m.client, m.admin, loadgen.Call{Method: "POST", Path: "/v1/promotions", Body: body, Token: m.token})
	if a.Status != http.StatusCreated {
		return fmt.Errorf("create %s: %d %s", what, a.Status, a.Body)
	}
	return nil
}

// shardSales creates one hot, one big and one rated promotion on every shard.
func (m roundMaker) shardSales(r *round, hotTotal int64) error {
	need := map[int][]kind{}
	for s := 0; s < ring.Shards; s++ {
		need[s] = []kind{hot, big, rated}
	}
	for n := 0; len(r.sales) < ring.Shards*3; n++ {
		id := fmt.Sprintf("%s-%s-%d", m.run, m.name, n)
		typ := 1 + n%2
		shard := ring.Default.Shard(promo.Key(id, typ))
		if len(need[shard]) == 0 {
			continue
		}
		k := need[shard][0]
		need[shard] = need[shard][1:]
		s := sale{Promotion: checker.Promotion{PromoID: id, Type: typ}, kind: k}
		body := map[string]any{"promoId": id, "type": typ, "title": "drill " + m.name, "maxPerGrab": 2, "startAt": m.start, "endAt": m.end}
		switch k {
		case hot:
			s.Total, s.PerPin, s.PerIP = hotTotal+int64(rand.IntN(int(hotTotal))), 1, 3
		case big:
			s.Total, s.PerPin, s.PerIP = 1_000_000, 4, 12
		case rated:
			s.Total, s.PerPin, s.rateLimit = 50_000, 3, 4
			body["rateLimit"] = map[string]any{"limit": s.rateLimit, "windowSeconds": 1}
		}
		body["total"], body["perPinLimit"], body["perIpLimit"] = s.Total, s.PerPin, s.PerIP
		if err := m.create(body, "promotion "+id); err != nil {
			return err
		}
		r.sales = append(r.sales, s)
		if k == hot {
			r.hot = append(r.hot, s)
		} else {
			r.other = append(r.other, s)
		}
	}
	return nil
}

// bucketed creates the hot sale of the day: little stock for the crowd it draws,
// tight limits, its stock over drillBuckets shards, so the drills' faults meet its
// parts too.
func (m roundMaker) bucketed(hotTotal int64) (sale, error) {
	id := fmt.Sprintf("%s-%s-b", m.run, m.name)
	b := sale{Promotion: checker.Promotion{PromoID: id, Type: 1, Total: 4 * hotTotal, PerPin: 1, PerIP: 3, Buckets: drillBuckets}, kind: hot}
	body := map[string]any{"promoId": id, "type": 1, "title": "drill " + m.name + " (buckets)", "maxPerGrab": 2, "startAt": m.start, "endAt": m.end,
		"total": b.Total, "perPinLimit": b.PerPin, "perIpLimit": b.PerIP, "buckets": drillBuckets}
	return b, m.create(body, fmt.Sprintf("promotion %s in %d buckets", id, drillBuckets))
}

// pool creates the round's envelope pool on shard: hot too, so it sells out and
// lives on the envelopes cancels give back; its grabs take 1 or 2 envelopes (a pin
// may hold 2), now and then beside other items.
func (m roundMaker) pool(shard int) (sale, error) {
	var id string
	for n := 0; ; n++ {
		id = fmt.Sprintf("%s-%s-e%d", m.run, m.name, n)
		if ring.Default.Shard(promo.Key(id, 1)) == shard {
			break
		}
	}
	amount := int64(poolEnvelopes*poolMeanAmount) + rand.Int64N(poolEnvelopes) // not a round sum: the split must hit it to the unit
	s := sale{Promotion: checker.Promotion{PromoID: id, Type: 1, Total: poolEnvelopes, PerPin: 2, PerIP: 6, EnvelopeAmount: amount}, kind: hot}
	body := map[string]any{"promoId": id, "type": 1, "title": "drill " + m.name + " (envelope pool)", "maxPerGrab": 2, "startAt": m.start, "endAt": m.end,
		"total": s.Total, "perPinLimit": s.PerPin, "perIpLimit": s.PerIP, "envelope": map[string]any{"amount": amount, "minAmount": poolMinAmount}}
	return s, m.create(body, "envelope pool "+id)
}

// pick chooses the promotions of one grab: usually one, sometimes two or three on
// different shards (a multi-shard grab that must take all or nothing); hot
// promotions draw half of the picks.
func (r *round) pick(rnd *rand.Rand) []sale {
	n := 1
	switch x := rnd.IntN(100); {
	case x >= 95:
		n = 3
	case x >= 75:
		n = 2
	}
	var out []sale
	seen := map[string]bool{}
	for len(out) < n {
		pool := r.other
		if rnd.IntN(2) == 0 {
			pool = r.hot
		}
		s := pool[rnd.IntN(len(pool))]
		switch rnd.IntN(8) {
		case 0: // an eighth of the picks: the crowd's favourite
			s = r.bucketed
		case 1: // and another eighth the envelope pool
			s = r.pool
		}
		if seen[s.Key()] {
			continue
		}
		seen[s.Key()] = true
		out = append(out, s)
	}
	return out
}

func (r *round) promotions() []checker.Promotion {
	out := make([]checker.Promotion, len(r.sales))
	for i, s := range r.sales {
		out[i] = s.Promotion
	}
	return out
}

// createCanary creates p, a promotion of the drill's own that no load touches, on
// sale for six hours, and has the checker check it with the rest.
func (d *drillEnv) createCanary(ctx context.Context, p checker.Promotion, maxPerGrab int, title string, out *outcome) bool {
	body := map[string]any{"promoId": p.PromoID, "type": p.Type, "title": title, "total": p.Total, "perPinLimit": p.PerPin,
		"perIpLimit": p.PerIP, "maxPerGrab": maxPerGrab, "startAt": time.Now().UTC().Add(-5 * time.Second).Format(time.RFC3339),
		"endAt": time.Now().UTC().Add(6 * time.Hour).Format(time.RFC3339)}
	a := loadgen.Do(ctx, loadgen.Client(1, 15*time.Second), d.ctl.st.Admin, loadgen.Call{Method: "POST", Path: "/v1/promotions", Body: body, Token: d.admin})
	if a.Status != http.StatusCreated {
		out.fail("create the %s: %d %s", title, a.Status, a.Body)
		return false
	}
	out.canaries = append(out.canaries, p)
	return true
}
