package main

import (
	"context"
	"fmt"

	"github.com/flashsale/platform/tools/loadgen"
)

// soldOutTotal is the stock of the sold-out phase's promotion: sold in a moment.
const soldOutTotal = 100

// soldOut is scenario 2: answers/s once the promotion has sold out, against a bare
// Go handler answering a fixed JSON, same load generator, same concurrency.
func (b *bench) soldOut(ctx context.Context) error {
	id := b.id + "-sold"
	if err := b.admin.create(ctx, id, soldOutTotal); err != nil {
		return err
	}
	b.tally.track(id, soldOutTotal)
	r := httpRun(b.st.Grab, func(n int64) loadgen.Call { return grabCall(b.token, b.id+"s", id, n) },
		func(n int64, a loadgen.Answer) { b.tally.seen(id, n, a) })
	answers, _ := r(ctx, "sell-out", 16, soldOutTotal*3)
	sellOut := loadgen.Summarize(sent(answers), 1)
	if sellOut.ByResult["GRANTED"] != soldOutTotal {
		return fmt.Errorf("sell-out of %d units granted %d (%s)", soldOutTotal, sellOut.ByResult["GRANTED"], resultMix(sellOut))
	}
	base, stop, err := spawnBaseline(ctx, "bare", "", 0)
	if err != nil {
		return err
	}
	defer stop()
	// Retries (no attempt header) are the third side: each is looked up in the
	// request index before the cached SOLD_OUT may answer it.
	retry := httpRun(b.st.Grab, func(n int64) loadgen.Call {
		c := grabCall(b.token, b.id+"t", id, n)
		c.Attempt = 0
		return c
	}, func(n int64, a loadgen.Answer) { b.tally.seen(id, n, a) })
	m := b.turns(ctx, nil,
		func() measured { return measure(ctx, r, "grab-service sold out", b.conc, b.dur) },
		func() measured {
			return measure(ctx, httpRun(base, func(n int64) loadgen.Call { return grabCall(b.token, b.id+"x", id, n) }, nil),
				"bare handler", b.conc, b.dur)
		},
		func() measured { return measure(ctx, retry, "grab-service sold out, retries", b.conc, b.dur) })
	ours, bare, retries := m[0], m[1], m[2]
	b.res.TargetRuns.SoldOut, b.res.TargetRuns.Retries, b.res.TargetRuns.Bare = &ours, &retries, &bare
	b.res.add(ratioRow{N: 2, Scenario: "sold-out phase (first attempts)", Ours: perSecond(ours.Summary), OursUnit: "answers/s",
		Base: perSecond(bare.Summary), BaseUnit: "answers/s of a bare Go handler", Target: 0.8,
		Detail: fmt.Sprintf("%s; retries (no X-Grab-Attempt: 1, so each looked up in the request index) %.0f answers/s, %.2f of the bare handler",
			resultMix(ours.Summary), perSecond(retries.Summary), perSecond(retries.Summary)/perSecond(bare.Summary))})
	b.res.addCPU(2, ours, bare, "2: grab-service sold out, per answer", "2: bare handler, per answer")
	return nil
}
