package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/tools/checker"
)

func ringShard(key string) int { return ring.Default.Shard(key) }

// row is one drill's line of the table.
type row struct {
	name, title string
	st          *stats
	faults, bad int
	rep         checker.Report // over every promotion and request so far
	checked     bool
	checks      []string // drill-specific failures
	notes       []string
	findings    []string
	elapsed     time.Duration
}

func (r row) failed() bool { return len(r.checks) > 0 || !r.checked || r.rep.Failed() }

func (r row) verdict() string {
	if !r.failed() {
		return fmt.Sprintf("PASS (%s)", r.elapsed.Round(time.Second))
	}
	return fmt.Sprintf("FAIL (%s): %d drill checks failed; %s", r.elapsed.Round(time.Second), len(r.checks), r.rep.Summary())
}

// refusals are the definite answers that refuse a grab.
var refusals = []string{"SOLD_OUT", "PIN_LIMIT", "IP_LIMIT", "STOPPED", "NOT_STARTED", "ENDED", "NOT_FOUND", "REQUEST_ID_REUSED", "BLOCKED"}

func count(m map[string]int64, keys ...string) int64 {
	var n int64
	for _, k := range keys {
		n += m[k]
	}
	return n
}

// printTable writes the drills' one table, then the answers by result.
func printTable(w io.Writer, rows []row, o options) {
	fmt.Fprintf(w, "\nFault drills: %.0f grabs/s by %d buyers over 50 promotions a drill (16 shards x hot, big, rate-limited, a hot one in %d buckets, and a pool of %d envelopes on shard %d), ~20%% of grants cancelled.\n", o.rate, o.workers, drillBuckets, poolEnvelopes, o.redisShard)
	fmt.Fprintf(w, "The -sat drills run with no pace: %d buyers, each grabbing again as soon as it is answered (the stack's peak).\n", o.satWorkers)
	fmt.Fprintln(w, "Invariant counts are over every promotion and request so far, after the stack settled; all must be 0.")
	fmt.Fprintln(w, "envelopes: a pool's envelopes held twice, lost or taken wrongly; amount drift: money a pool handed out beyond its budget or on which clients, Redis and the record disagree.")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "drill\tsecs\trequests\tsent\tgranted\trefused\t429\t503\tunknown\treturned\tfaults\tbad inputs\toversold\tleaked\tlost\tlimit-breached\trecord drift\tenvelopes\tamount drift\tdrill checks\tverdict\t")
	var tot row
	tot.st = newStats()
	for _, r := range rows {
		g := r.st.grabs
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n",
			r.name, r.elapsed.Seconds(), r.st.requests, r.st.attempts, g["GRANTED"], count(g, refusals...), g["RATE_LIMITED"],
			count(g, "UNAVAILABLE", "DEGRADED"), g[checker.Unknown]+r.st.cancels[checker.Unknown], count(r.st.cancels, "RETURNED", "ALREADY_RETURNED"),
			r.faults, r.bad, r.rep.Oversold, r.rep.Leaked, r.rep.Lost, r.rep.LimitBreached, r.rep.Drift, r.rep.EnvelopeFaults, r.rep.AmountDrift, len(r.checks)+r.rep.Unresolved, passFail(r))
		tot.st.add(r.st)
		tot.faults += r.faults
		tot.bad += r.bad
		tot.elapsed += r.elapsed
		tot.checks = append(tot.checks, r.checks...)
	}
	if len(rows) > 0 {
		last := rows[len(rows)-1]
		tot.rep, tot.checked = last.rep, last.checked
		for _, r := range rows {
			tot.checked = tot.checked && r.checked
		}
		g := tot.st.grabs
		fmt.Fprintf(tw, "all\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n",
			tot.elapsed.Seconds(), tot.st.requests, tot.st.attempts, g["GRANTED"], count(g, refusals...), g["RATE_LIMITED"],
			count(g, "UNAVAILABLE", "DEGRADED"), g[checker.Unknown]+tot.st.cancels[checker.Unknown], count(tot.st.cancels, "RETURNED", "ALREADY_RETURNED"),
			tot.faults, tot.bad, tot.rep.Oversold, tot.rep.Leaked, tot.rep.Lost, tot.rep.LimitBreached, tot.rep.Drift, tot.rep.EnvelopeFaults, tot.rep.AmountDrift, len(tot.checks)+tot.rep.Unresolved, passFail(tot))
	}
	tw.Flush()

	fmt.Fprintln(w, "\nFinal answers by result (grabs; cancels):")
	for _, r := range rows {
		fmt.Fprintf(w, "  %-9s %s; %s\n", r.name, byResult(r.st.grabs), byResult(r.st.cancels))
	}
	var notes []string
	for _, r := range rows {
		for _, n := range r.notes {
			notes = append(notes, r.name+": "+n)
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
}

func passFail(r row) string {
	if r.failed() {
		return "FAIL"
	}
	return "PASS"
}

func byResult(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// printFindings lists each drill's findings, the first 25 unless verbose (the rest
// are in the log at logPath).
func printFindings(w io.Writer, rows []row, verbose bool, logPath string) {
	for _, r := range rows {
		if len(r.findings) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s findings:\n", r.name)
		n := len(r.findings)
		if !verbose && n > 25 {
			n = 25
		}
		for _, f := range r.findings[:n] {
			fmt.Fprintf(w, "  - %s\n", f)
		}
		if n < len(r.findings) {
			fmt.Fprintf(w, "  ... %d more in %s\n", len(r.findings)-n, logPath)
		}
	}
}
