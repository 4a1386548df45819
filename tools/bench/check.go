package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/flashsale/platform/tools/loadgen"
	"github.com/flashsale/platform/tools/plan/capacity"
)

// The capacity model checked at 1/N: the hot and sold-out phases' figures (each
// process's CPU per GRANTED and per sold-out answer, and the cores those runs got)
// predict runs of another mix of answers on this machine, which are then measured.

// mixRun is one check scenario: of every soldOut+grants calls, soldOut go to a
// promotion already sold out and grants to the hot promotion, at conc in flight.
type mixRun struct {
	SoldOut, Grants int
	Conc            int
}

func (m mixRun) share() float64 { return float64(m.SoldOut) / float64(m.SoldOut+m.Grants) }

func (m mixRun) String() string {
	return fmt.Sprintf("%d sold-out answers to %d GRANTED at concurrency %d", m.SoldOut, m.Grants, m.Conc)
}

// checkRuns are the scenarios checked: the worked examples' mix (a million
// sold-out answers to 100,000 grants) at the feeding runs' concurrency, and an
// even mix at half of it.
func (b *bench) checkRuns() []mixRun {
	return []mixRun{{SoldOut: 10, Grants: 1, Conc: b.conc}, {SoldOut: 1, Grants: 1, Conc: max(b.conc/2, 1)}}
}

// checkRow is one scenario's prediction against its median run, and every run's
// rate (their spread is the machine's noise).
type checkRow struct {
	Mix       mixRun
	Predicted capacity.Prediction // the model: a GRANTED's cost at the mix's grants in flight
	Flat      capacity.Prediction // the same with the hot phase's cost per GRANTED (flat per answer)
	InFlight  float64             // the mix's grants in flight, as the model reckons them
	Measured  capacity.Prediction
	Rates     []float64 // each round's answers/s
	// FeedOther and Other are the cores other programs took during the feeding
	// runs and during the median run: what moves the cores the stack gets.
	FeedOther, Other float64
	Result           string // the median run's answers by result
	Missing          string // why the scenario was not predicted or measured
}

// check is the check phase, after the scaling runs whose curve it reads.
func (b *bench) check(ctx context.Context) error {
	m := b.res.machineFigures()
	if m == nil {
		b.res.Check = append(b.res.Check, checkRow{Missing: "not measured: the model is fed by the hot and soldout scenarios"})
		return nil
	}
	if err := b.createHot(ctx); err != nil {
		return err
	}
	sold, err := b.soldOutPromotion(ctx, "-csold")
	if err != nil {
		return err
	}
	for _, mix := range b.checkRuns() {
		p, err := m.Predict(mix.share(), mix.Conc, b.res.Growth)
		if err != nil {
			return err
		}
		flat, err := m.Predict(mix.share(), mix.Conc, nil)
		if err != nil {
			return err
		}
		row := checkRow{Mix: mix, Predicted: p, Flat: flat, InFlight: m.GrantsInFlight(mix.share(), mix.Conc)}
		fmt.Fprintf(os.Stderr, "   %s: predicted %.0f answers/s at %.0f µs of CPU per answer (%.0f grants in flight; flat per answer %.0f at %.0f µs)\n",
			mix, p.Rate, p.Total, row.InFlight, flat.Rate, flat.Total)
		var runs []measured
		for round := 1; round <= rounds && ctx.Err() == nil; round++ {
			b.settle(20 * time.Second)
			r := measure(ctx, b.mixRunner(mix, sold), fmt.Sprintf("mix %d:%d c=%d", mix.SoldOut, mix.Grants, mix.Conc), mix.Conc, b.dur)
			report(r.Summary)
			reportCPU(r)
			runs = append(runs, r)
			row.Rates = append(row.Rates, perSecond(r.Summary))
		}
		med := medianRun(runs, nil)
		row.Measured = capacity.Observe(perSecond(med.Summary), stackPer(med.cpuPer()))
		row.Result = resultMix(med.Summary)
		row.FeedOther, row.Other = m.OtherCores, otherCores(&med)
		fmt.Fprintf(os.Stderr, "   measured %.0f answers/s at %.0f µs (%s)\n", row.Measured.Rate, row.Measured.Total, capacity.Explain(p, row.Measured))
		b.res.Check = append(b.res.Check, row)
	}
	return nil
}

// mixRunner sends call n to the sold-out promotion or the hot one, as the mix says.
func (b *bench) mixRunner(mix mixRun, sold string) runner {
	hot, period := b.hotID(), int64(mix.SoldOut+mix.Grants)
	pick := func(n int64) string {
		if n%period < int64(mix.SoldOut) {
			return sold
		}
		return hot
	}
	return httpRun(b.st.Grab, func(n int64) loadgen.Call { return grabCall(b.token, b.id+"k", pick(n), n) },
		func(n int64, a loadgen.Answer) { b.tally.seen(pick(n), n, a) })
}

// soldOutPromotion creates a promotion of soldOutTotal units and sells it out.
func (b *bench) soldOutPromotion(ctx context.Context, suffix string) (string, error) {
	id := b.id + suffix
	if err := b.admin.create(ctx, id, soldOutTotal); err != nil {
		return "", err
	}
	b.tally.track(id, soldOutTotal)
	r := httpRun(b.st.Grab, func(n int64) loadgen.Call { return grabCall(b.token, b.id+suffix, id, n) },
		func(n int64, a loadgen.Answer) { b.tally.seen(id, n, a) })
	answers, _ := r(ctx, "", 16, soldOutTotal*3)
	if s := loadgen.Summarize(sent(answers), 1); s.ByResult["GRANTED"] != soldOutTotal {
		return "", fmt.Errorf("sell-out of %d units granted %d (%s)", soldOutTotal, s.ByResult["GRANTED"], resultMix(s))
	}
	return id, nil
}
