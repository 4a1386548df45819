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

// sampleTargets: every figure of the table, each exactly at its target but rows 5 and 6 (and 9, above it).
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
		// 3,150 GRANTED/s with random requestIds against the hot phase's 3,500: 0.9.
		HotRandom: runOf(2*time.Second, map[string]int{"GRANTED": 6300}, nil),
		// 500,000 rows/s rebuilt against a scan of 1,000,000: 0.5.
		Rebuild: &rebuildRates{Rebuild: 500_000, Scan: 1_000_000},
	}
	res.TargetRuns.HotDerived = res.TargetRuns.Hot
	res.Latency = &latencyRow{F: figures{P50: 2, P99: 10.5}}
	// 8 buckets grant 0.8 of 1 bucket's rate; the busiest shard's calls per grant fall 5 times.
	res.Buckets = []bucketRow{{K: 1, F: figures{Granted: 5000}, Busiest: shardLoad{Calls: 2}},
		{K: 4, F: figures{Granted: 4500}, Busiest: shardLoad{Calls: 0.5}},
		{K: 8, F: figures{Granted: 4000}, Busiest: shardLoad{Calls: 0.4}}}
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
		{3150, 3500, 0.9, "yes"},
		{4000, 5000, 0.8, "yes"},
		{2, 0.4, 5, "yes"},
		{500_000, 1_000_000, 0.5, "yes"},
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
		{targetRow{Ours: 3, Base: 1, Target: 3, AtMost: true}, "yes"},
		{targetRow{Ours: 3.01, Base: 1, Target: 3, AtMost: true}, "**no**"},
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
		"| grab-service CPU per GRANTED ÷ bare handler CPU per answer | 200 µs per GRANTED | — | — | ≤ 3 | not measured |",
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

// Every row of the table prints with its verdict when its runs are there, and
// "not measured" (its figures as dashes) when the scenario they come from was
// skipped.
func TestEveryTargetRowPrintsItsVerdict(t *testing.T) {
	rowOf := func(md, figure string) string {
		for _, line := range strings.Split(md, "\n") {
			if strings.HasPrefix(line, "| "+figure+" |") {
				return line
			}
		}
		t.Fatalf("no row %q in\n%s", figure, md)
		return ""
	}
	res := sampleTargets()
	md := res.targetTable().markdown()
	rows := res.targetRows()
	if len(rows) != 11 {
		t.Fatalf("%d rows, want 11", len(rows))
	}
	for _, r := range rows {
		line := rowOf(md, r.Figure)
		if !strings.HasSuffix(line, " | yes |") && !strings.HasSuffix(line, " | **no** |") {
			t.Errorf("measured row without a verdict: %s", line)
		}
	}
	skipped := map[string]func(*results){
		"hot": func(r *results) {
			r.TargetRuns.Hot, r.TargetRuns.Direct, r.TargetRuns.HotRandom, r.TargetRuns.HotDerived = nil, nil, nil, nil
		},
		"soldout":  func(r *results) { r.TargetRuns.SoldOut, r.TargetRuns.Retries, r.TargetRuns.Bare = nil, nil, nil },
		"buckets":  func(r *results) { r.Buckets = nil },
		"latency":  func(r *results) { r.Latency = nil },
		"recovery": func(r *results) { r.TargetRuns.Rebuild = nil },
	}
	lost := map[string][]string{
		"hot": {"hot phase GRANTED/s ÷ bare handler answers/s", "redis CPU (all shards) per GRANTED ÷ one raw q.lua EVALSHA call",
			"grab-service CPU per GRANTED ÷ bare handler CPU per answer", "hot phase GRANTED/s with random requestIds ÷ with derived ones (scenario 1)"},
		"soldout": {"sold-out first attempts (X-Grab-Attempt: 1) ÷ bare", "sold-out, no header (looked up in the request index) ÷ bare"},
		"buckets": {"GRANTED/s at 8 buckets ÷ 1 bucket, this machine (scenario 5)",
			"busiest shard's script calls per grant, 1 bucket ÷ 8 buckets (scenario 5)"},
		"latency":  {"p99 ÷ p50 at half of peak (scenario 7)"},
		"recovery": {"rebuild rows/s ÷ raw scan rows/s (scenario 6)"},
	}
	for name, skip := range skipped {
		res := sampleTargets()
		skip(res)
		md := res.targetTable().markdown()
		for _, figure := range lost[name] {
			if line := rowOf(md, figure); !strings.HasSuffix(line, " | not measured |") || strings.Contains(line, "NaN") {
				t.Errorf("%s skipped: %s", name, line)
			}
		}
	}
}

func TestTargetTableInTheReport(t *testing.T) {
	res := sampleResults()
	res.TargetRuns = sampleTargets().TargetRuns
	md := res.markdown()
	for _, want := range []string{"#### Targets", "| figure | ours | baseline (same run) | ratio | target | met |",
		"| hot phase GRANTED/s ÷ bare handler answers/s | 3,500 GRANTED/s | 10,000 answers/s | 0.35 | ≥ 0.35 | yes |",
		"| grab-service CPU per GRANTED ÷ bare handler CPU per answer | 200 µs per GRANTED | 25.0 µs per answer | 8.00 | ≤ 3 | **no** |",
		"| hot phase GRANTED/s with random requestIds ÷ with derived ones (scenario 1) | 3,150 GRANTED/s | 3,500 GRANTED/s | 0.90 | ≥ 0.9 | yes |",
		"| rebuild rows/s ÷ raw scan rows/s (scenario 6) | 500,000 rows/s | 1,000,000 rows/s | 0.50 | ≥ 0.5 | yes |",
		// sampleResults' bucket table has no 8 buckets: rows 9 and 10 not measured.
		"| GRANTED/s at 8 buckets ÷ 1 bucket, this machine (scenario 5) | — | 8,000 GRANTED/s | — | ≥ 0.75 | not measured |",
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
