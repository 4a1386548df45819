package main

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/tools/loadgen"
)

// spreadPromotions is scenario 4's spread: 4 promotions on each of the 16 shards.
const spreadPromotions = 64

// spread is scenario 4: GRANTED/s and latency of one promotion (one shard) against
// 64 promotions over the 16 shards, at every concurrency level.
func (b *bench) spread(ctx context.Context) error {
	if err := b.createHot(ctx); err != nil {
		return err
	}
	shards := make([]int, ring.Shards)
	for i := range shards {
		shards[i] = i
	}
	ids := idsOnShards(b.id+"-s", shards, spreadPromotions/ring.Shards)
	for _, id := range ids {
		if err := b.admin.create(ctx, id, unlimited); err != nil {
			return err
		}
		b.tally.track(id, unlimited)
	}
	many := httpRun(b.st.Grab, func(n int64) loadgen.Call { return grabCall(b.token, b.id+"m", ids[n%int64(len(ids))], n) },
		func(n int64, a loadgen.Answer) { b.tally.seen(ids[n%int64(len(ids))], n, a) })
	one := b.hotRun()
	for _, c := range b.levels {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.settle(5 * time.Second)
		o := measure(ctx, one, fmt.Sprintf("c=%d 1 promotion", c), c, b.dur)
		report(o.Summary)
		b.settle(5 * time.Second)
		m := measure(ctx, many, fmt.Sprintf("c=%d 64 promotions", c), c, b.dur)
		report(m.Summary)
		b.res.Spread = append(b.res.Spread, spreadRow{Conc: c, One: figuresOf(o.Summary), Many: figuresOf(m.Summary)})
	}
	return nil
}

// figures are one run's numbers as the report shows them.
type figures struct {
	Granted, Answers float64 // per second
	P50, P99, P999   float64 // milliseconds
	Mix              string
}

func figuresOf(s loadgen.Summary) figures {
	ms := func(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1000 }
	return figures{Granted: perSecond(s, "GRANTED"), Answers: perSecond(s), P50: ms(s.P50), P99: ms(s.P99), P999: ms(s.P999), Mix: resultMix(s)}
}

type spreadRow struct {
	Conc      int
	One, Many figures
}
