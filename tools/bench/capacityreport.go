package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/flashsale/platform/tools/plan/capacity"
)

// checkScope says what the check table compares.
const checkScope = "The capacity model (tools/plan/capacity, docs/capacity.md) fed by this run's hot phase (CPU per GRANTED by " +
	"process) and sold-out phase (CPU per sold-out first attempt), by the cores the stack and the load generator used in " +
	"those two runs, and by the scaling runs of one promotion, predicts each mix below: each process's CPU per answer is its " +
	"two costs weighted by the mix, a GRANTED costing what the scaling runs measured at the mix's grants in flight (the mix's " +
	"concurrency times the share of the time its grants hold a slot, by the feeding runs' latencies; fewer grants in flight " +
	"share fewer of grab-service's pipelines and Kafka's batches), and the rate is the cores over the sum. The last column is " +
	"the same prediction with the hot phase's cost per GRANTED whatever the mix: flat per answer, as bin/plan sizes a fleet. Each mix is then run three times (sold-out answers from a promotion sold out " +
	"beforehand, grants from the hot promotion) and the median run compared; \"rounds\" is the three runs' answers/s. A " +
	"process under a tenth of the predicted total is shown but not held to 20%. Where a rate misses, the line below it splits " +
	"the miss: the rate is the cores over the CPU per answer, so measured ÷ predicted rate = (cores the stack got, measured ÷ " +
	"predicted) × (CPU per answer, predicted ÷ measured)."

// checkTable renders the check: a block of rows per mix.
func (res *results) checkTable() table {
	t := table{head: []string{"mix", "figure", "predicted", "measured (median run)", "off by", "within 20%", "flat per answer would say"}}
	for _, c := range res.Check {
		if c.Missing != "" {
			t.rows = append(t.rows, []string{"—", "—", "—", c.Missing, "—", "not measured", "—"})
			continue
		}
		mix := fmt.Sprintf("%s (%.0f grants in flight)", c.Mix, c.InFlight)
		p, m, f := c.Predicted, c.Measured, c.Flat
		t.rows = append(t.rows,
			checkLine(mix, fmt.Sprintf("answers/s (rounds %s)", ratesText(c.Rates)), p.Rate, m.Rate, f.Rate, true),
			checkLine(mix, "µs of CPU per answer, all processes", p.Total, m.Total, f.Total, true),
			checkLine(mix, "cores used (the stack and the load generator)", p.Cores, m.Cores, f.Cores, false))
		for _, role := range roles {
			pv, mv := p.PerAnswer[role], m.PerAnswer[role]
			if pv < 0.5 && mv < 0.5 {
				continue
			}
			t.rows = append(t.rows, checkLine(mix, role+", µs per answer", pv, mv, f.PerAnswer[role], pv >= p.Total/10))
		}
	}
	return t
}

// checkLine is one figure of a mix; held says whether it gets a verdict.
func checkLine(mix, figure string, predicted, measured, flat float64, held bool) []string {
	verdict := "— (under a tenth of the total)"
	switch {
	case held && capacity.Within(predicted, measured):
		verdict = "yes"
	case held:
		verdict = "**no**"
	case strings.HasPrefix(figure, "cores"):
		verdict = "— (the machine's, not the model's)"
	}
	off := "—"
	if measured > 0 {
		off = fmt.Sprintf("%+.0f%%", 100*(predicted-measured)/measured)
	}
	flatText := figText(flat)
	if measured > 0 {
		flatText += fmt.Sprintf(" (%+.0f%%)", 100*(flat-measured)/measured)
	}
	return []string{mix, figure, figText(predicted), figText(measured), off, verdict, flatText}
}

func figText(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "—"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	}
	return num(v)
}

func ratesText(rates []float64) string {
	if len(rates) == 0 {
		return "none"
	}
	lo, hi := rates[0], rates[0]
	for _, r := range rates {
		lo, hi = min(lo, r), max(hi, r)
	}
	return fmt.Sprintf("%s–%s", num(lo), num(hi))
}

// checkMisses are the lines that split each mix's rate miss (capacity.Explain).
func (res *results) checkMisses() []string {
	var out []string
	for _, c := range res.Check {
		if c.Missing == "" {
			out = append(out, fmt.Sprintf("%s (%s): %s. Other programs on the machine took %.2f cores during the feeding runs, %.2f during this one.",
				c.Mix, c.Result, capacity.Explain(c.Predicted, c.Measured), c.FeedOther, c.Other))
		}
	}
	return out
}

// growthRoles are the scaling table's process columns.
var growthRoles = []string{roleGrab, roleRedis, roleKafka, roleSink, roleMySQL, roleLoad}

// growthTable renders the scaling runs with their growth (capacity.Grown).
func (res *results) growthTable() table {
	t := table{head: []string{"promotions", "concurrency", "GRANTED/s"}}
	for _, r := range growthRoles {
		t.head = append(t.head, r+" µs/GRANTED")
	}
	t.head = append(t.head, "all µs/GRANTED", "vs 1 promotion", "vs the highest concurrency")
	for _, g := range capacity.Grown(capacity.WithHot(res.Growth, res.machineFigures())) {
		row := []string{fmt.Sprint(g.Promotions), fmt.Sprint(g.Concurrency), num(g.Granted)}
		for _, r := range growthRoles {
			row = append(row, fmt.Sprintf("%.0f", g.PerGrant[r]))
		}
		row = append(row, fmt.Sprintf("%.0f", g.Total()), growthText(g.VsOnePromotion), growthText(g.VsTopConcurrent))
		t.rows = append(t.rows, row)
	}
	return t
}

func growthText(v float64) string {
	if v == 0 {
		return "—"
	}
	return ratioText(v)
}

// growthVerdict says whether CPU per GRANTED stayed flat within 20% over the runs.
func (res *results) growthVerdict() string {
	if flat, why := capacity.Flat(capacity.WithHot(res.Growth, res.machineFigures())); !flat {
		return "Not flat within 20%: " + why + "."
	}
	return "Flat within 20% over these runs."
}

// capacityMarkdown is the report's check and scaling sections.
func (res *results) capacityMarkdown() string {
	var b strings.Builder
	if len(res.Check) > 0 {
		b.WriteString("\n#### The capacity model checked at 1/N: predicted against measured\n\n" + checkScope + "\n\n")
		b.WriteString(res.checkTable().markdown())
		for _, l := range res.checkMisses() {
			b.WriteString("\n" + l + "\n")
		}
	}
	if len(res.Growth) > 0 {
		b.WriteString("\n#### How cost grows: CPU per GRANTED by promotions and concurrency\n\n" + scalingScope + "\n\n")
		b.WriteString(res.growthTable().markdown())
		b.WriteString("\n" + res.growthVerdict() + "\n")
	}
	return b.String()
}

// capacityHTML is capacityMarkdown's sections for the HTML page.
func (res *results) capacityHTML() string {
	var b strings.Builder
	if len(res.Check) > 0 {
		b.WriteString("<h2>The capacity model checked at 1/N</h2>\n<p>" + htmlCell(checkScope) + "</p>\n")
		b.WriteString(res.checkTable().html())
		for _, l := range res.checkMisses() {
			b.WriteString("<p>" + htmlCell(l) + "</p>\n")
		}
	}
	if len(res.Growth) > 0 {
		b.WriteString("<h2>How cost grows</h2>\n<p>" + htmlCell(scalingScope) + "</p>\n")
		b.WriteString(res.growthTable().html())
		b.WriteString("<p>" + htmlCell(res.growthVerdict()) + "</p>\n")
	}
	return b.String()
}
