package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/flashsale/platform/tools/plan/capacity"
)

// results is everything one run found; report.go and chart.go render it.
type results struct {
	Started, Finished time.Time
	Command           string
	RandomRequestIDs  bool   // --random-request-ids
	LoadStart         string // 1-minute load average when the run started and ended
	LoadEnd           string
	Machine           machine
	Conc              int
	Duration          time.Duration
	HotGranted        float64 // scenario 1's GRANTED/s, scenario 3's "ours"
	Rows              []ratioRow
	Spread            []spreadRow
	Latency           *latencyRow
	Buckets           []bucketRow
	Invariants        []invariantRow
	CPU               []cpuComparison        // scenarios 1 to 3 counted in CPU per answer
	TargetRuns        targetRuns             // the runs the targets table is computed from (targets.go)
	Check             []checkRow             // the capacity model's predictions against their runs (check.go)
	Growth            []capacity.GrowthPoint // CPU per GRANTED by promotions and concurrency (scaling.go)
}

// ratioRow is one line of the main table: ours against a baseline of the same run.
type ratioRow struct {
	N                  int
	Scenario           string
	Ours, Base         float64
	OursUnit, BaseUnit string
	Target             float64
	AtMost             bool   // the target is an upper bound (latency spread)
	Detail             string // answers by result, checks
	Missing            string // set when the scenario was not measured, saying why
}

func (r ratioRow) ratio() float64 {
	if r.Base == 0 {
		return math.NaN()
	}
	return r.Ours / r.Base
}

func (r ratioRow) met() bool {
	if r.Missing != "" || r.Target == 0 || math.IsNaN(r.ratio()) {
		return false
	}
	if r.AtMost {
		return r.ratio() <= r.Target
	}
	return r.ratio() >= r.Target
}

func (res *results) add(r ratioRow) {
	res.Rows = append(res.Rows, r)
	sort.SliceStable(res.Rows, func(i, j int) bool { return res.Rows[i].N < res.Rows[j].N })
}

func (res *results) invariantsPass() bool {
	for _, r := range res.Invariants {
		if !r.Pass {
			return false
		}
	}
	for _, r := range res.Buckets {
		if !r.SellOutPass {
			return false
		}
	}
	return true
}

// summaryRows adds the rows that are derived from the spread and latency runs.
func (res *results) summaryRows() []ratioRow {
	rows := append([]ratioRow(nil), res.Rows...)
	for _, s := range res.Spread {
		if s.Conc == res.Conc {
			rows = append(rows, ratioRow{N: 4, Scenario: fmt.Sprintf("spread at c=%d: 64 promotions on 16 shards vs 1 promotion", s.Conc),
				Ours: s.Many.Granted, OursUnit: "GRANTED/s, 64 promotions", Base: s.One.Granted, BaseUnit: "GRANTED/s, 1 promotion"})
		}
	}
	if l := res.Latency; l != nil {
		rows = append(rows, ratioRow{N: 7, Scenario: fmt.Sprintf("latency at half of peak (%.0f of %.0f GRANTED/s)", l.Achieved, l.Peak),
			Ours: l.F.P99, OursUnit: fmt.Sprintf("p99 ms (the run of median p99/p50 of %d)", rounds), Base: l.F.P50, BaseUnit: "p50 ms", Target: 5, AtMost: true,
			Detail: fmt.Sprintf("p99.9 %.2f ms; %s", l.F.P999, l.F.Mix)})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].N < rows[j].N })
	return rows
}

// write puts latest.md, latest.html and latest.svg into dir, and the model's
// figures as figures.json (bin/plan --figures reads it).
func (res *results) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := res.modelFigures().WriteFile(filepath.Join(dir, figuresFile)); err != nil {
		return fmt.Errorf("figures: %w", err)
	}
	svg := res.chart()
	files := map[string]string{"latest.md": res.markdown(), "latest.svg": svg, "latest.html": res.html(svg)}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (res *results) files(dir string) []string {
	var out []string
	for _, n := range []string{"latest.md", "latest.html", "latest.svg", figuresFile} {
		out = append(out, filepath.Join(dir, n))
	}
	return out
}

// figuresFile is the model's figures of the run, beside the report.
const figuresFile = "figures.json"
