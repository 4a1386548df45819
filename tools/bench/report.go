package main

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"
)

// table is rendered both as Markdown and as HTML.
type table struct {
	head []string
	rows [][]string
}

func (t table) markdown() string {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", "\\|") + " |")
		}
		b.WriteString("\n")
	}
	line(t.head)
	sep := make([]string, len(t.head))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}

func (t table) html() string {
	var b strings.Builder
	b.WriteString("<table>\n<tr>")
	for _, h := range t.head {
		b.WriteString("<th>" + html.EscapeString(h) + "</th>")
	}
	b.WriteString("</tr>\n")
	for _, r := range t.rows {
		b.WriteString("<tr>")
		for _, c := range r {
			b.WriteString("<td>" + htmlCell(c) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
	return b.String()
}

// htmlCell escapes a cell, rendering a cell that Markdown bolds (**no**) in bold.
func htmlCell(c string) string {
	if inner, ok := strings.CutPrefix(c, "**"); ok && strings.HasSuffix(inner, "**") && len(inner) > 2 {
		return "<strong>" + html.EscapeString(strings.TrimSuffix(inner, "**")) + "</strong>"
	}
	return html.EscapeString(c)
}

// num formats a rate with thousands separators.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func ratioText(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v >= 100:
		return fmt.Sprintf("%.0f×", v)
	case v >= 10:
		return fmt.Sprintf("%.1f×", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func (res *results) mainTable() table {
	t := table{head: []string{"#", "scenario", "ours", "baseline (same run)", "ratio", "target", "met"}}
	for _, r := range res.summaryRows() {
		if r.Missing != "" {
			t.rows = append(t.rows, []string{fmt.Sprint(r.N), r.Scenario, r.Missing, "", "", targetText(r), "not measured"})
			continue
		}
		met := "yes"
		switch {
		case r.Target == 0:
			met = "(no target)"
		case !r.met():
			met = "**no**"
		}
		ours, base := num(r.Ours)+" "+r.OursUnit, num(r.Base)+" "+r.BaseUnit
		if r.N == 7 {
			ours, base = fmt.Sprintf("%.2f %s", r.Ours, r.OursUnit), fmt.Sprintf("%.2f %s", r.Base, r.BaseUnit)
		}
		t.rows = append(t.rows, []string{fmt.Sprint(r.N), r.Scenario, ours, base, ratioText(r.ratio()), targetText(r), met})
	}
	return t
}

func targetText(r ratioRow) string {
	switch {
	case r.Target == 0:
		return "—"
	case r.AtMost:
		return fmt.Sprintf("≤ %g", r.Target)
	}
	return fmt.Sprintf("≥ %g", r.Target)
}

func (res *results) spreadTable() table {
	t := table{head: []string{"concurrency", "1 promotion GRANTED/s", "p50 ms", "p99 ms", "64 promotions GRANTED/s", "p50 ms", "p99 ms", "64 vs 1"}}
	for _, s := range res.Spread {
		t.rows = append(t.rows, []string{fmt.Sprint(s.Conc),
			num(s.One.Granted), fmt.Sprintf("%.2f", s.One.P50), fmt.Sprintf("%.2f", s.One.P99),
			num(s.Many.Granted), fmt.Sprintf("%.2f", s.Many.P50), fmt.Sprintf("%.2f", s.Many.P99),
			ratioText(s.Many.Granted / s.One.Granted)})
	}
	return t
}

func (res *results) bucketTable() table {
	t := table{head: []string{"buckets", "GRANTED/s here", "p50 ms", "p99 ms", "vs 1 bucket",
		"busiest shard's script calls per grant", "vs 1 bucket", "busiest shard's Redis CPU per grant (µs)", "vs 1 bucket",
		"fall-overs per grab in the sell-out", "sell-out check"}}
	for _, r := range res.Buckets {
		one := res.Buckets[0]
		t.rows = append(t.rows, []string{fmt.Sprint(r.K), num(r.F.Granted), fmt.Sprintf("%.2f", r.F.P50), fmt.Sprintf("%.2f", r.F.P99),
			ratioText(r.F.Granted / one.F.Granted), fmt.Sprintf("%.3f", r.Busiest.Calls), ratioText(one.Busiest.Calls / r.Busiest.Calls),
			fmt.Sprintf("%.1f", r.Busiest.CPUus), ratioText(one.Busiest.CPUus / r.Busiest.CPUus), fmt.Sprintf("%.2f", r.FallOvers), r.SellOut})
	}
	return t
}

func (res *results) invariantTable() table {
	t := table{head: []string{"invariant (docs/CONTRACT.md)", "promotions checked", "verdict"}}
	for _, r := range res.Invariants {
		v := "PASS"
		if !r.Pass {
			v = "FAIL: " + strings.Join(r.Failures, "; ")
		}
		t.rows = append(t.rows, []string{r.Name, fmt.Sprint(r.Promotions), v})
	}
	return t
}

func (res *results) header() []string {
	return []string{
		fmt.Sprintf("Run %s, %s; `%s`.", res.Started.Format("2006-01-02 15:04 UTC"), res.Finished.Sub(res.Started).Round(time.Second), res.Command),
		"Machine: " + res.Machine.String() + ".",
		fmt.Sprintf("The load generator, grab-service, the 16 Redis servers, the Kafka broker and MariaDB all share these %d cores, "+
			"so every figure is a ratio against a baseline measured in the same run on the same machine. "+
			"Each run: a warm-up, then about %s of load at the stated concurrency over keep-alive connections; "+
			"in scenarios 1, 2, 3 and 6 each side is run %d times, the two sides taking turns, and the medians compared; scenario 7 reports the run of median p99/p50 of %d.", res.Machine.Cores, res.Duration, rounds, rounds),
		res.requestIDs(),
		fmt.Sprintf("Load average (1 min) %s at the start, %s at the end: on %d cores, anything well above the stack's own work "+
			"is other programs competing for the same cores, and every rate here is lower for it.", res.LoadStart, res.LoadEnd, res.Machine.Cores),
	}
}

// requestIDs says how the run's grabs name themselves, which decides whether
// their claims take a round trip of their own.
func (res *results) requestIDs() string {
	if res.RandomRequestIDs {
		return "RequestIds as they come (`--random-request-ids`): 15 grabs in 16 claim theirs on another shard than their take's, a round trip of its own."
	}
	return "RequestIds derived beside their promotion, as docs/CONTRACT.md recommends to checkout services (\"A requestId beside its promotion\"): each grab's claim is made by its take's own q.lua call. `--random-request-ids` sends them as they come."
}

// markdown is the report: printed, written to latest.md, and pasted into
// docs/benchmarks.md.
func (res *results) markdown() string {
	var b strings.Builder
	for _, l := range res.header() {
		b.WriteString(l + "\n\n")
	}
	b.WriteString(res.mainTable().markdown())
	b.WriteString("\nAnswers by result, per scenario: ")
	var mixes []string
	for _, r := range res.summaryRows() {
		if r.Detail != "" {
			mixes = append(mixes, fmt.Sprintf("%d: %s", r.N, r.Detail))
		}
	}
	b.WriteString(strings.Join(mixes, "; ") + ".\n")
	b.WriteString("\n#### Targets\n\n" + targetsScope + "\n\n")
	b.WriteString(res.targetTable().markdown())
	if len(res.CPU) > 0 {
		b.WriteString("\n#### Where the CPU goes: scenarios 1 to 3 in CPU per answer\n\n" + cpuScope + "\n\n")
		b.WriteString(res.cpuTable().markdown())
	}
	b.WriteString(res.capacityMarkdown())
	if len(res.Spread) > 0 {
		b.WriteString("\n#### 4. Spread: throughput and latency against concurrency\n\n")
		b.WriteString(res.spreadTable().markdown())
		b.WriteString("\n" + res.mermaid())
	}
	if len(res.Invariants) > 0 {
		b.WriteString("\n#### Invariants after the run\n\n")
		b.WriteString(res.invariantTable().markdown())
	}
	if len(res.Buckets) > 0 {
		b.WriteString("\n#### 5. A hot promotion beyond one shard: throughput by bucket count\n\n" + bucketsScope + "\n\n")
		b.WriteString(res.bucketTable().markdown())
	}
	return b.String()
}

func (res *results) html(svg string) string {
	var b strings.Builder
	b.WriteString("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>flash-sale benchmarks</title>\n" +
		"<style>body{font:14px sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}" +
		"td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f3f3f3}</style></head><body>\n")
	b.WriteString("<h1>Flash-sale benchmarks</h1>\n")
	for _, l := range res.header() {
		b.WriteString("<p>" + html.EscapeString(l) + "</p>\n")
	}
	b.WriteString(res.mainTable().html())
	b.WriteString("<h2>Targets</h2>\n<p>" + html.EscapeString(targetsScope) + "</p>\n")
	b.WriteString(res.targetTable().html())
	if len(res.CPU) > 0 {
		b.WriteString("<h2>Where the CPU goes: scenarios 1 to 3 in CPU per answer</h2>\n<p>" + html.EscapeString(cpuScope) + "</p>\n")
		b.WriteString(res.cpuTable().html())
	}
	b.WriteString(res.capacityHTML())
	b.WriteString("<h2>4. Spread: throughput and latency against concurrency</h2>\n" + svg + "\n")
	b.WriteString(res.spreadTable().html())
	b.WriteString("<h2>Invariants</h2>\n" + res.invariantTable().html())
	if len(res.Buckets) > 0 {
		b.WriteString("<h2>5. A hot promotion beyond one shard</h2>\n<p>" + html.EscapeString(bucketsScope) + "</p>\n")
		b.WriteString(res.bucketTable().html())
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

// mermaid is the spread chart in a form docs/benchmarks.md renders inline.
func (res *results) mermaid() string {
	var xs, one, many, p99one, p99many []string
	top, topLat := 0.0, 0.0
	for _, s := range res.Spread {
		xs = append(xs, fmt.Sprintf("\"%d\"", s.Conc))
		one = append(one, fmt.Sprintf("%.0f", s.One.Granted))
		many = append(many, fmt.Sprintf("%.0f", s.Many.Granted))
		p99one = append(p99one, fmt.Sprintf("%.1f", s.One.P99))
		p99many = append(p99many, fmt.Sprintf("%.1f", s.Many.P99))
		top = max(top, s.One.Granted, s.Many.Granted)
		topLat = max(topLat, s.One.P99, s.Many.P99)
	}
	x := "[" + strings.Join(xs, ", ") + "]"
	return fmt.Sprintf("GRANTED/s against concurrency (first line 1 promotion, second line 64 promotions):\n\n"+
		"```mermaid\nxychart-beta\n  title \"GRANTED/s by concurrency\"\n  x-axis \"concurrency\" %s\n  y-axis \"GRANTED/s\" 0 --> %.0f\n  line [%s]\n  line [%s]\n```\n\n"+
		"p99 latency (ms) against concurrency (first line 1 promotion, second line 64 promotions):\n\n"+
		"```mermaid\nxychart-beta\n  title \"p99 ms by concurrency\"\n  x-axis \"concurrency\" %s\n  y-axis \"p99 ms\" 0 --> %.0f\n  line [%s]\n  line [%s]\n```\n",
		x, math.Ceil(top*1.1), strings.Join(one, ", "), strings.Join(many, ", "),
		x, math.Ceil(topLat*1.1), strings.Join(p99one, ", "), strings.Join(p99many, ", "))
}
