// Command plan sizes the fleet for a sale: given sold-out answers and grants per
// second and the share one promotion takes, how many grab-service instances, Redis
// shards and buckets, Kafka brokers and partitions, flow-sink instances and MySQL
// capacity serve it, with the headroom assumed and the resource that saturates
// first. Its figures are what `make bench` measured (docs/capacity.md says which
// run, and how to feed it another's or production hardware's).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flashsale/platform/tools/plan/capacity"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "plan:", err)
		os.Exit(2)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	var l capacity.Load
	fl := capacity.Fleet{Shards: 16, MaxBuckets: 16}
	figures := fs.String("figures", "", "JSON figures: a bench run's bench-results/figures.json, or production hardware's (default: the run in docs/benchmarks.md)")
	speedup := fs.Float64("speedup", 0, "production core speed over the figures' machine (default the figures' own, 1)")
	headroom := fs.Float64("headroom", 0.4, "share of every resource left free at the planned load")
	examples := fs.Bool("examples", false, "print docs/capacity.md's worked examples")
	fs.Float64Var(&l.SoldOut, "sold-out", 1_000_000, "sold-out answers per second")
	fs.Float64Var(&l.Grants, "grants", 100_000, "GRANTED per second")
	fs.Float64Var(&l.HotShare, "hot-share", 0.5, "share of the grants one promotion takes (0..1)")
	fs.Float64Var(&l.CancelShare, "cancel-share", 0.1, "share of grants cancelled later")
	fs.Float64Var(&fl.GrabCores, "grab-cores", 4, "cores per grab-service instance")
	fs.Float64Var(&fl.SinkCores, "sink-cores", 2, "cores per flow-sink instance")
	fs.Float64Var(&fl.KafkaCores, "kafka-cores", 8, "cores per Kafka broker")
	fs.Float64Var(&fl.MySQLCores, "mysql-cores", 32, "cores of the MySQL primary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f := capacity.Builtin
	if *figures != "" {
		var err error
		if f, err = capacity.ReadFigures(*figures); err != nil {
			return err
		}
	}
	if *speedup > 0 {
		f.Speedup = *speedup
	}
	if *headroom < 0 || *headroom >= 1 || l.HotShare < 0 || l.HotShare > 1 || l.SoldOut < 0 || l.Grants < 0 {
		return fmt.Errorf("want headroom in [0, 1), hot-share in [0, 1] and non-negative rates")
	}
	fl.Utilization = 1 - *headroom
	if *examples {
		for _, ex := range workedExamples {
			fmt.Fprintf(out, "### %s\n\n", ex.Name)
			render(out, f, fl, ex.Load)
		}
	} else {
		render(out, f, fl, l)
	}
	renderGrowth(out, f)
	return nil
}

// render prints one plan as a Markdown table.
func render(out io.Writer, f capacity.Figures, fl capacity.Fleet, l capacity.Load) {
	fmt.Fprintf(out, "Load: %.0f sold-out answers/s, %.0f GRANTED/s (%.0f%% to one promotion, %.0f%% cancelled later). Figures: %s; production cores %.1fx. Headroom %.0f%%.\n\n",
		l.SoldOut, l.Grants, 100*l.HotShare, 100*l.CancelShare, f.Source, max(f.Speedup, 1), 100*(1-fl.Utilization))
	if len(f.Builtin) > 0 {
		fmt.Fprintf(out, "Not in the figures file, so taken from the built-in run: %s.\n\n", strings.Join(f.Builtin, ", "))
	}
	p := capacity.Size(f, fl, l)
	fmt.Fprintln(out, "| resource | provision | busy at this load | note |")
	fmt.Fprintln(out, "| --- | --- | --- | --- |")
	for _, line := range p.Lines {
		fmt.Fprintf(out, "| %s | %s | %.0f%% | %s |\n", line.Resource, line.Need, 100*line.Busy, line.Note)
	}
	fmt.Fprintf(out, "\nSaturates first: %s.\n\n", p.Bound)
}

// workedExamples are docs/capacity.md's.
var workedExamples = []struct {
	Name string
	Load capacity.Load
}{
	{"1,000,000 sold-out answers/s, 100,000 grants/s, one promotion half of them",
		capacity.Load{SoldOut: 1_000_000, Grants: 100_000, HotShare: 0.5, CancelShare: 0.1}},
	// make demo: 20,000 buyers for 1,000 units (and three smaller promotions); scaled
	// 1,000 times and pressed within 10 s: 2,000,000 answers/s, the units gone in those 10 s.
	{"make demo's sale x1000: 20,000,000 buyers for 1,000,000 units in 10 s",
		capacity.Load{SoldOut: 1_900_000, Grants: 100_000, HotShare: 1, CancelShare: 0.05}},
}

// renderGrowth prints how CPU per GRANTED grew over the figures' scaling runs,
// when they hold any: the plan assumes it flat.
func renderGrowth(out io.Writer, f capacity.Figures) {
	points := capacity.WithHot(f.Growth, f.Machine)
	if len(f.Growth) == 0 {
		return
	}
	fmt.Fprintln(out, "How CPU per GRANTED grew in the figures' scaling runs (the plan takes it as flat, at the hot phase's figure):")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| promotions | concurrency | GRANTED/s | µs of CPU per GRANTED | vs 1 promotion | vs the highest concurrency |")
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- |")
	for _, g := range capacity.Grown(points) {
		fmt.Fprintf(out, "| %d | %d | %.0f | %.0f | %s | %s |\n", g.Promotions, g.Concurrency, g.Granted, g.Total(), times(g.VsOnePromotion), times(g.VsTopConcurrent))
	}
	if flat, why := capacity.Flat(points); flat {
		fmt.Fprintf(out, "\nFlat within %.0f%% over these runs.\n", 100*capacity.Tolerance)
	} else {
		fmt.Fprintf(out, "\nNot flat within %.0f%%: %s.\n", 100*capacity.Tolerance, why)
	}
}

func times(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v)
}
