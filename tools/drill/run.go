package main

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/platform/tools/checker"
)

// runDrill sells a fresh round under load, runs the drill, stops the load, lets the
// stack settle and checks every promotion and request so far.
func (d *drillEnv) runDrill(ctx context.Context, dr drill) row {
	start := time.Now()
	r := row{name: dr.name, title: dr.title, st: newStats()}
	d.logf("== %s: %s", dr.name, dr.title)
	rd, err := newRound(ctx, d.adm, d.run, dr.name, 40, d.o.redisShard)
	if err != nil {
		r.checks = append(r.checks, "round not created: "+err.Error())
		r.elapsed = time.Since(start)
		return r
	}
	d.rounds = append(d.rounds, rd)
	var out outcome
	lr := d.load.start(rd, d.shapeOf(dr))
	sleep(ctx, d.o.hold)
	dr.run(ctx, d, rd, &out)
	sleep(ctx, d.o.hold)
	r.st = lr.stop()
	if len(out.canaries) > 0 {
		d.rounds = append(d.rounds, &round{name: dr.name + "-canary", sales: salesOf(out.canaries)})
	}
	r.faults, r.bad, r.checks, r.notes = out.faults, out.bad, out.checks, out.notes
	r.checks = append(r.checks, wrongAnswers(d.load.requests(), start)...)

	promos := d.promotions()
	if err := d.src.Settle(ctx, promos, d.o.settle); err != nil {
		r.notes = append(r.notes, "did not settle within "+d.o.settle.String()+": "+err.Error())
	}
	snap, err := d.src.Read(ctx, promos)
	if err != nil {
		r.checks = append(r.checks, "checker could not read the stack: "+err.Error())
	} else {
		r.rep = checker.Verify(promos, d.load.requests(), snap)
		r.checked = true
		note, exercised := poolOutcome(rd.pool, d.load.requests(), snap)
		r.notes = append(r.notes, note)
		if !exercised {
			r.checks = append(r.checks, "the round's envelope pool "+rd.pool.Key()+" granted no envelope: the drill did not exercise it")
		}
		d.logf("%s: %s", dr.name, r.rep.String())
	}
	r.findings = append(append([]string(nil), r.checks...), r.rep.Findings...)
	r.elapsed = time.Since(start)
	for _, n := range r.notes {
		d.logf("%s note: %s", dr.name, n)
	}
	for _, c := range r.checks {
		d.logf("%s FAILED check: %s", dr.name, c)
	}
	return r
}

// poolOutcome describes what the round's envelope pool handed out, by the clients'
// answers and by the record, and reports whether any envelope was granted.
func poolOutcome(pool sale, reqs []checker.Request, snap checker.Snapshot) (string, bool) {
	key := pool.Key()
	var granted, returned, toldAmount int64
	for _, r := range reqs {
		for _, it := range r.Items {
			if it.Key() != key || r.Grab != "GRANTED" {
				continue
			}
			granted += it.Num
			if held, _ := r.Held(); held {
				toldAmount += it.Amount
			} else {
				returned += it.Num
			}
		}
	}
	var recorded int64
	for _, row := range snap.Record[key] {
		if row.Kind == "GRAB" {
			recorded += row.Amount
		} else {
			recorded -= row.Amount
		}
	}
	st := snap.Redis[key]
	return fmt.Sprintf("envelope pool %s: %d envelopes granted, %d returned, %d of %d left; held by the clients' answers %d, by the record %d, envLeft %d, of the budget %d",
		key, granted, returned, st.Remaining, pool.Total, toldAmount, recorded, st.EnvLeft, pool.EnvelopeAmount), granted > 0
}

// shapeOf is the load a drill runs under: the steady rate, or for a saturation
// drill as many grabs as the workers get answered, from buyers enough that the
// per-pin and per-ip limits of the big promotions do not end the sale early.
func (d *drillEnv) shapeOf(dr drill) shape {
	if dr.saturate {
		return shape{workers: d.o.satWorkers, pins: 50_000, ips: 10_000}
	}
	return shape{perSecond: d.o.rate, workers: d.o.workers, pins: 600, ips: 120}
}

func salesOf(ps []checker.Promotion) []sale {
	out := make([]sale, len(ps))
	for i, p := range ps {
		out[i] = sale{Promotion: p}
	}
	return out
}

// wrongAnswers finds definite answers that are false whatever the fault: every
// drill promotion exists, so NOT_FOUND for a grab is wrong (the shard may be lost,
// not the promotion: that is UNAVAILABLE, retry); and a cancel of a grab the client
// was told GRANTED must find it.
func wrongAnswers(reqs []checker.Request, since time.Time) []string {
	var out []string
	for _, r := range reqs {
		if r.Sent.Before(since) {
			continue
		}
		switch {
		case r.Grab == "NOT_FOUND":
			out = append(out, fmt.Sprintf("%s: grab answered NOT_FOUND for a live promotion", r.RequestID))
		case r.Grab == "GRANTED" && r.Cancel == "NOT_FOUND":
			out = append(out, fmt.Sprintf("%s: cancel of a granted grab answered NOT_FOUND", r.RequestID))
		}
	}
	return out
}
