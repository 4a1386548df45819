// Command plan sizes the fleet for a sale: given sold-out answers and grants per
// second and the share one promotion takes, how many grab-service instances, Redis
// shards and buckets, Kafka brokers and partitions, flow-sink instances and MySQL
// capacity serve it, with the headroom assumed and the resource that saturates
// first. Its figures are what `make bench` measured (docs/capacity.md says which
// run, and how to feed it another's or production hardware's).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
)

// measured are the figures of the `make bench` run in docs/benchmarks.md, "Latest
// results" (2026-12-03 12:14 UTC, 2 shared cores): the hot phase's CPU per GRANTED
// and the sold-out phase's per answer by process, scenario 5's busiest shard.
var measured = Figures{
	Source:       "make bench, 2026-12-03 12:14 UTC, commit 1f0c7af, 2 shared AMD EPYC cores (docs/benchmarks.md)",
	GrabPerGrant: 149, GrabPerSoldOut: 51,
	RedisPerGrant: 86, RedisPerSoldOut: 1,
	BusiestShardPerGrant: map[int]float64{1: 96.7, 2: 64.4, 4: 55.7, 8: 49.5, 16: 41.0},
	KafkaPerEvent:        31, SinkPerEvent: 16.4, MySQLPerEvent: 28,
	EventBytes: 450, Speedup: 1,
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "plan:", err)
		os.Exit(2)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	var l Load
	fl := Fleet{Shards: 16, MaxBuckets: 16}
	figures := fs.String("figures", "", "JSON file of Figures (default: the run in docs/benchmarks.md)")
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
	f := measured
	if *figures != "" {
		b, err := os.ReadFile(*figures)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("figures %s: %w", *figures, err)
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
		return nil
	}
	render(out, f, fl, l)
	return nil
}

// render prints one plan as a Markdown table.
func render(out io.Writer, f Figures, fl Fleet, l Load) {
	fmt.Fprintf(out, "Load: %.0f sold-out answers/s, %.0f GRANTED/s (%.0f%% to one promotion, %.0f%% cancelled later). Figures: %s; production cores %.1fx. Headroom %.0f%%.\n\n",
		l.SoldOut, l.Grants, 100*l.HotShare, 100*l.CancelShare, f.Source, max(f.Speedup, 1), 100*(1-fl.Utilization))
	p := Size(f, fl, l)
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
	Load Load
}{
	{"1,000,000 sold-out answers/s, 100,000 grants/s, one promotion half of them",
		Load{SoldOut: 1_000_000, Grants: 100_000, HotShare: 0.5, CancelShare: 0.1}},
	// make demo: 20,000 buyers for 1,000 units (and three smaller promotions); scaled
	// 1,000 times and pressed within 10 s: 2,000,000 answers/s, the units gone in those 10 s.
	{"make demo's sale x1000: 20,000,000 buyers for 1,000,000 units in 10 s",
		Load{SoldOut: 1_900_000, Grants: 100_000, HotShare: 1, CancelShare: 0.05}},
}
