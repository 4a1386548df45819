package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/flashsale/platform/client"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/tools/checker"
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
func newRound(ctx context.Context, admin *client.Admin, run, name string, hotTotal int64, poolShard int) (*round, error) {
	m := roundMaker{ctx: ctx, admin: admin, run: run, name: name,
		start: time.Now().UTC().Add(-5 * time.Second).Truncate(time.Second), end: time.Now().UTC().Add(6 * time.Hour).Truncate(time.Second)}
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
	ctx        context.Context
	admin      *client.Admin
	run, name  string
	start, end time.Time
}

// create creates one promotion through promo-admin; what names it in the error.
func (m roundMaker) create(spec client.PromotionSpec, what string) error {
	spec.StartAt, spec.EndAt = m.start, m.end
	if _, err := m.admin.Create(m.ctx, spec); err != nil {
		return fmt.Errorf("create %s: %w", what, err)
	}
	return nil
}

// newAdmin is the drills' client of promo-admin.
func newAdmin(base, token string) (*client.Admin, error) {
	return client.NewAdmin(client.Config{BaseURL: base, Token: token, AttemptTimeout: 15 * time.Second, UserAgent: "flashsale-drill"})
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
		spec := client.PromotionSpec{PromoID: id, Type: typ, Title: "drill " + m.name, MaxPerGrab: 2}
		switch k {
		case hot:
			s.Total, s.PerPin, s.PerIP = hotTotal+int64(rand.IntN(int(hotTotal))), 1, 3
		case big:
			s.Total, s.PerPin, s.PerIP = 1_000_000, 4, 12
		case rated:
			s.Total, s.PerPin, s.rateLimit = 50_000, 3, 4
			spec.RateLimit = &client.RateLimit{Limit: s.rateLimit, WindowSeconds: 1}
		}
		spec.Total, spec.PerPinLimit, spec.PerIPLimit = s.Total, s.PerPin, s.PerIP
		if err := m.create(spec, "promotion "+id); err != nil {
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
	spec := client.PromotionSpec{PromoID: id, Type: 1, Title: "drill " + m.name + " (buckets)", MaxPerGrab: 2,
		Total: b.Total, PerPinLimit: b.PerPin, PerIPLimit: b.PerIP, Buckets: drillBuckets}
	return b, m.create(spec, fmt.Sprintf("promotion %s in %d buckets", id, drillBuckets))
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
	spec := client.PromotionSpec{PromoID: id, Type: 1, Title: "drill " + m.name + " (envelope pool)", MaxPerGrab: 2,
		Total: s.Total, PerPinLimit: s.PerPin, PerIPLimit: s.PerIP, Envelope: &client.EnvelopeSpec{Amount: amount, MinAmount: poolMinAmount}}
	return s, m.create(spec, "envelope pool "+id)
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
	spec := client.PromotionSpec{PromoID: p.PromoID, Type: p.Type, Title: title, Total: p.Total, PerPinLimit: p.PerPin,
		PerIPLimit: p.PerIP, MaxPerGrab: int64(maxPerGrab), StartAt: time.Now().UTC().Add(-5 * time.Second).Truncate(time.Second),
		EndAt: time.Now().UTC().Add(6 * time.Hour).Truncate(time.Second)}
	if _, err := d.adm.Create(ctx, spec); err != nil {
		out.fail("create the %s: %v", title, err)
		return false
	}
	out.canaries = append(out.canaries, p)
	return true
}
