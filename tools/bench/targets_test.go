package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/tools/loadgen"
)

func runOf(elapsed time.Duration, byResult map[string]int, cpu cpuUse) *measured {
	n := 0
	for _, c := range byResult {
		n += c
	}
	return &measured{Summary: loadgen.Summary{Calls: n, ByResult: byResult, Elapsed: elapsed}, CPU: cpu}
}

// sampleTargets: every figure of the table, each exactly at its target but the last two.
func sampleTargets() *results {
	res := &results{}
	res.TargetRuns = targetRuns{
		// 3,500 GRANTED/s; redis 2 s over 7,000 grants = 285.7 µs; grab-service 1.4 s = 200 µs; the sink 0.14 s = 20 µs.
		Hot: runOf(2*time.Second, map[string]int{"GRANTED": 7000, "UNAVAILABLE": 100},
			cpuUse{roleRedis: 2 * time.Second, roleGrab: 1400 * time.Millisecond, roleSink: 140 * time.Millisecond}),
		// redis 2 s over 7,000 calls: row 4 exactly 1.
		Direct: runOf(time.Second, map[string]int{"GRANTED": 7000}, cpuUse{roleRedis: 2 * time.Second}),
		// 10,000 answers/s; the bare handler 0.5 s over 20,000 = 25 µs, so grab-service's 200 is 8 of it.
		Bare:    runOf(2*time.Second, map[string]int{"SOLD_OUT": 20000}, cpuUse{roleBaseline: 500 * time.Millisecond}),
		SoldOut: runOf(2*time.Second, map[string]int{"SOLD_OUT": 17000}, nil), // 8,500/s
		Retries: runOf(2*time.Second, map[string]int{"SOLD_OUT": 12000}, nil), // 6,000/s
	}
	res.Latency = &latencyRow{F: figures{P50: 2, P99: 10.5}}
	return res
}

func TestTargetRowsComputeEachFigure(t *testing.T) {
	rows := sampleTargets().targetRows()
	want := []struct {
		ours, base, value float64
		verdict           string
	}{
		{3500, 10000, 0.35, "yes"},
		{8500, 10000, 0.85, "yes"},
		{6000, 10000, 0.60, "yes"},
		{2e6 / 7000.0, 2e6 / 7000.0, 1, "yes"},
		{200, 25, 8, "**no**"},
		{10.5, 2, 5.25, "**no**"},
		{20, math.NaN(), 20, "yes"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	same := func(a, b float64) bool { return math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) < 1e-9 }
	for i, w := range want {
		r := rows[i]
		if !same(r.Ours, w.ours) || (!r.Absolute && !same(r.Base, w.base)) || !same(r.value(), w.value) || r.verdict() != w.verdict {
			t.Errorf("row %d %q: ours %v base %v value %v %s, want %v %v %v %s", i+1, r.Figure,
				r.Ours, r.Base, r.value(), r.verdict(), w.ours, w.base, w.value, w.verdict)
		}
	}
}

func TestTargetVerdictsAtTheBoundaries(t *testing.T) {
	for _, c := range []struct {
		r    targetRow
		want string
	}{
		{targetRow{Ours: 35, Base: 100, Target: 0.35}, "yes"},
		{targetRow{Ours: 34.99, Base: 100, Target: 0.35}, "**no**"},
		{targetRow{Ours: 4, Base: 1, Target: 4, AtMost: true}, "yes"},
		{targetRow{Ours: 4.01, Base: 1, Target: 4, AtMost: true}, "**no**"},
		{targetRow{Ours: 20, Absolute: true, Target: 20, AtMost: true}, "yes"},
		{targetRow{Ours: 20.1, Absolute: true, Target: 20, AtMost: true}, "**no**"},
		{targetRow{Ours: math.NaN(), Base: 100, Target: 0.35}, "not measured"},
		{targetRow{Ours: 10, Base: math.NaN(), Target: 0.35}, "not measured"},
		{targetRow{Ours: 10, Base: 0, Target: 0.35}, "not measured"},
		{targetRow{Ours: math.NaN(), Absolute: true, Target: 20, AtMost: true}, "not measured"},
	} {
		if have := c.r.verdict(); have != c.want {
			t.Errorf("%+v: %s, want %s", c.r, have, c.want)
		}
	}
}

func TestTargetTableShowsMissingFiguresAsDashes(t *testing.T) {
	res := sampleTargets()
	res.TargetRuns.Bare = nil                                // scenario 2 skipped: rows 1 to 3 and 5 lose their baseline
	res.TargetRuns.Direct.CPU = cpuUse{}                     // no redis CPU seen in the EVALSHA run
	delete(res.TargetRuns.Hot.CPU, roleSink)                 // no flow sink running
	res.TargetRuns.Retries = runOf(0, map[string]int{}, nil) // a run without answers
	res.Latency = nil
	md := res.targetTable().markdown()
	for _, want := range []string{
		"| hot phase GRANTED/s ÷ bare handler answers/s | 3,500 GRANTED/s | — | — | ≥ 0.35 | not measured |",
		"| sold-out, no header (looked up in the request index) ÷ bare | — | — | — | ≥ 0.6 | not measured |",
		"| redis CPU (all shards) per GRANTED ÷ one raw q.lua EVALSHA call | 286 µs per GRANTED | — | — | ≤ 1 | not measured |",
		"| grab-service CPU per GRANTED ÷ bare handler CPU per answer | 200 µs per GRANTED | — | — | ≤ 4 | not measured |",
		"| p99 ÷ p50 at half of peak (scenario 7) | — | — | — | ≤ 5 | not measured |",
		"| — | none (an absolute figure) | — | ≤ 20 µs per event | not measured |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "NaN") || strings.Contains(md, "n/a") || strings.Contains(md, "| 0 ") {
		t.Errorf("a missing figure printed as a number:\n%s", md)
	}
}

func TestTargetTableInTheReport(t *testing.T) {
	res := sampleResults()
	res.TargetRuns = sampleTargets().TargetRuns
	md := res.markdown()
	for _, want := range []string{"#### Targets", "| figure | ours | baseline (same run) | ratio | target | met |",
		"| hot phase GRANTED/s ÷ bare handler answers/s | 3,500 GRANTED/s | 10,000 answers/s | 0.35 | ≥ 0.35 | yes |",
		"| grab-service CPU per GRANTED ÷ bare handler CPU per answer | 200 µs per GRANTED | 25.0 µs per answer | 8.00 | ≤ 4 | **no** |",
		"| p99 ÷ p50 at half of peak (scenario 7) | 8.00 ms p99 | 2.00 ms p50 | 4.00 | ≤ 5 | yes |",
		"| 20.0 µs per event | none (an absolute figure) | — | ≤ 20 µs per event | yes |",
		"| 1 | hot |"} { // the older table stays
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if page := res.html(""); !strings.Contains(page, "<h2>Targets</h2>") || !strings.Contains(page, "<strong>no</strong>") {
		t.Error("the HTML report lacks the targets table")
	}
}
