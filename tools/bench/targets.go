package main

import (
	"fmt"
	"math"
)

// The targets table: the figures the platform is held to, each computed from runs
// the scenarios already make (none is run for it alone), each as a ratio against a
// baseline measured in the same run, or, for the flow sink, as CPU per event; a
// rate or a latency is never held to a wall-clock figure.

// targetRuns are the median runs the targets table is computed from.
type targetRuns struct {
	Hot     *measured // scenario 1: grab-service on the hot promotion
	Direct  *measured // scenario 1: q.lua by EVALSHA straight on the hot shard
	SoldOut *measured // scenario 2: grab-service sold out, first attempts (X-Grab-Attempt: 1)
	Retries *measured // scenario 2: grab-service sold out, no attempt header
	Bare    *measured // scenario 2: the bare handler (the same load generator and concurrency as the three above)
	// Scenario 1's hot phase with requestIds as they come and derived beside the
	// promotion: one of the two is Hot, the other run beside it.
	HotRandom, HotDerived *measured
	Rebuild               *rebuildRates // scenario 6's medians
}

// rebuildRates are scenario 6's two rates, flow rows per second.
type rebuildRates struct{ Rebuild, Scan float64 }

// rebuildRate and scanRate are scenario 6's rates; NaN without its run.
func (t targetRuns) rebuildRate() float64 {
	if t.Rebuild == nil {
		return missing
	}
	return t.Rebuild.Rebuild
}

func (t targetRuns) scanRate() float64 {
	if t.Rebuild == nil {
		return missing
	}
	return t.Rebuild.Scan
}

// targetRow is one line of the targets table. A value not measured is NaN and
// shows as "—"; a row without a baseline (Absolute) is held to its own figure.
type targetRow struct {
	Figure             string
	Ours, Base         float64
	OursUnit, BaseUnit string
	Absolute           bool
	Target             float64
	AtMost             bool
}

// value is what the target applies to: ours over the baseline, or ours alone.
func (r targetRow) value() float64 {
	if r.Absolute {
		return r.Ours
	}
	if math.IsNaN(r.Ours) || math.IsNaN(r.Base) || r.Base == 0 {
		return math.NaN()
	}
	return r.Ours / r.Base
}

// verdict is "yes", "**no**", or "not measured" when a figure is missing.
func (r targetRow) verdict() string {
	v := r.value()
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "not measured"
	case r.AtMost && v <= r.Target, !r.AtMost && v >= r.Target:
		return "yes"
	}
	return "**no**"
}

var missing = math.NaN()

// rate is the run's answers per second whose result is one of results (all
// answers when none given); NaN without a run.
func rate(m *measured, results ...string) float64 {
	if m == nil || m.Elapsed <= 0 || m.Calls == 0 {
		return missing
	}
	return perSecond(m.Summary, results...)
}

// answers counts the run's answers whose result is one of results (all when none given).
func answers(m *measured, results ...string) int {
	if m == nil {
		return 0
	}
	if len(results) == 0 {
		return m.Calls
	}
	n := 0
	for _, r := range results {
		n += m.ByResult[r]
	}
	return n
}

// cpuPerAnswer is µs of CPU a role spent during the run per answer whose result is
// one of results; NaN without a run, without such answers, or when the role spent
// nothing the samples saw (not running: no fake zero).
func cpuPerAnswer(m *measured, role string, results ...string) float64 {
	n := answers(m, results...)
	if n == 0 || m.CPU == nil {
		return missing
	}
	d, ok := m.CPU[role]
	if !ok || d <= 0 {
		return missing
	}
	return float64(d.Microseconds()) / float64(n)
}

// bucketFigure is f of scenario 5's row of k buckets; NaN when it has none, or
// when f is not positive (nothing was measured).
func bucketFigure(rows []bucketRow, k int, f func(bucketRow) float64) float64 {
	for _, r := range rows {
		if r.K == k {
			if v := f(r); v > 0 {
				return v
			}
		}
	}
	return missing
}

func bucketGranted(r bucketRow) float64 { return r.F.Granted }
func bucketCalls(r bucketRow) float64   { return r.Busiest.Calls }

// targetRows computes the table from the scenarios' runs.
func (res *results) targetRows() []targetRow {
	t := res.TargetRuns
	p99, p50 := missing, missing
	if l := res.Latency; l != nil {
		p99, p50 = l.F.P99, l.F.P50
	}
	return []targetRow{
		{Figure: "hot phase GRANTED/s ÷ bare handler answers/s",
			Ours: rate(t.Hot, "GRANTED"), OursUnit: "GRANTED/s", Base: rate(t.Bare), BaseUnit: "answers/s", Target: 0.35},
		{Figure: "sold-out first attempts (X-Grab-Attempt: 1) ÷ bare",
			Ours: rate(t.SoldOut), OursUnit: "answers/s", Base: rate(t.Bare), BaseUnit: "answers/s", Target: 0.85},
		{Figure: "sold-out, no header (looked up in the request index) ÷ bare",
			Ours: rate(t.Retries), OursUnit: "answers/s", Base: rate(t.Bare), BaseUnit: "answers/s", Target: 0.60},
		{Figure: "redis CPU (all shards) per GRANTED ÷ one raw q.lua EVALSHA call",
			Ours: cpuPerAnswer(t.Hot, roleRedis, "GRANTED"), OursUnit: "µs per GRANTED",
			Base: cpuPerAnswer(t.Direct, roleRedis, "GRANTED"), BaseUnit: "µs per call", Target: 1.0, AtMost: true},
		{Figure: "grab-service CPU per GRANTED ÷ bare handler CPU per answer",
			Ours: cpuPerAnswer(t.Hot, roleGrab, "GRANTED"), OursUnit: "µs per GRANTED",
			Base: cpuPerAnswer(t.Bare, roleBaseline), BaseUnit: "µs per answer", Target: 3, AtMost: true},
		{Figure: "p99 ÷ p50 at half of peak (scenario 7)",
			Ours: p99, OursUnit: "ms p99", Base: p50, BaseUnit: "ms p50", Target: 5, AtMost: true},
		// Every GRANTED answer follows its GRAB event's publication; the hot phase
		// cancels nothing, so its events are its GRANTED answers.
		{Figure: "flow sink CPU per event (hot phase: its CPU ÷ the run's GRANTED, one GRAB event each)",
			Ours: cpuPerAnswer(t.Hot, roleSink, "GRANTED"), OursUnit: "µs per event", Absolute: true, Target: 20, AtMost: true},
		{Figure: "hot phase GRANTED/s with random requestIds ÷ with derived ones (scenario 1)",
			Ours: rate(t.HotRandom, "GRANTED"), OursUnit: "GRANTED/s", Base: rate(t.HotDerived, "GRANTED"), BaseUnit: "GRANTED/s", Target: 0.9},
		{Figure: "GRANTED/s at 8 buckets ÷ 1 bucket, this machine (scenario 5)",
			Ours: bucketFigure(res.Buckets, 8, bucketGranted), OursUnit: "GRANTED/s",
			Base: bucketFigure(res.Buckets, 1, bucketGranted), BaseUnit: "GRANTED/s", Target: 0.75},
		{Figure: "busiest shard's script calls per grant, 1 bucket ÷ 8 buckets (scenario 5)",
			Ours: bucketFigure(res.Buckets, 1, bucketCalls), OursUnit: "calls per grant, 1 bucket",
			Base: bucketFigure(res.Buckets, 8, bucketCalls), BaseUnit: "calls per grant, 8 buckets", Target: 5},
		{Figure: "rebuild rows/s ÷ raw scan rows/s (scenario 6)",
			Ours: t.rebuildRate(), OursUnit: "rows/s", Base: t.scanRate(), BaseUnit: "rows/s", Target: 0.5},
	}
}

// targetTable renders targetRows: figure | ours | baseline | ratio | target | met.
func (res *results) targetTable() table {
	t := table{head: []string{"figure", "ours", "baseline (same run)", "ratio", "target", "met"}}
	for _, r := range res.targetRows() {
		base, ratio, target := figureText(r.Base, r.BaseUnit), ratioOrDash(r.value()), fmt.Sprintf("≥ %g", r.Target)
		if r.AtMost {
			target = fmt.Sprintf("≤ %g", r.Target)
		}
		if r.Absolute {
			base, ratio = "none (an absolute figure)", "—"
			target += " " + r.OursUnit
		}
		t.rows = append(t.rows, []string{r.Figure, figureText(r.Ours, r.OursUnit), base, ratio, target, r.verdict()})
	}
	return t
}

// figureText is a figure with its unit, "—" when not measured.
func figureText(v float64, unit string) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "—"
	case v >= 1000:
		return num(v) + " " + unit
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

func ratioOrDash(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	return ratioText(v)
}

// targetsScope says how the targets table is computed.
const targetsScope = "Each figure comes from the median runs of the scenarios above, none run for this table alone. " +
	"Rows 1 to 3 divide a rate by the bare Go handler's answers/s of scenario 2 (the same load generator, the same " +
	"concurrency; rows 2 and 3 taking turns with it, row 1 from scenario 1's median). Rows 4 and 5 come from the CPU " +
	"table's per-process figures: the 16 redis-servers summed, per GRANTED of the hot phase against per call of " +
	"scenario 1's EVALSHA run; grab-service per GRANTED against the bare handler's process per answer. Row 6 is " +
	"scenario 7's p99 over p50. Row 7 is the flow sink's CPU during the hot phase's median run over that run's " +
	"GRANTED answers (each one GRAB event; the hot phase cancels nothing); it has no baseline. " +
	"Row 8 is scenario 1's hot phase run a second way beside the first, taking turns with it: requestIds as a checkout " +
	"service sends its own order ids (each claim a round trip to its index shard) over requestIds derived beside their " +
	"promotion (the claim rides in the take). Rows 9 and 10 come from scenario 5's table: GRANTED/s at 8 buckets over 1 " +
	"bucket on this machine, and the busiest shard's script calls per grant at 1 bucket over 8. Row 11 is scenario 6's " +
	"rebuild rate over MySQL's raw scan of the same table. " +
	"A figure not measured (a scenario skipped, a process not seen) is \"—\"."
