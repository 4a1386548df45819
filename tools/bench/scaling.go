package main

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/tools/loadgen"
	"github.com/flashsale/platform/tools/plan/capacity"
)

// How cost grows: CPU per GRANTED by process with the grants spread over 1 to 16
// promotions (each on a shard of its own) and at 1, 4 and 16 requests in flight.
// grab-service runs 4 workers per shard (grab.Config.Workers), so 4 in flight can
// keep one shard's workers busy and 16 keeps four shards' busy or queues in front
// of one shard's, where calls share pipelines. The model takes CPU per answer as
// flat; these runs say how far that holds (docs/capacity.md).

// scalingGrid is the runs: every promotion count at every concurrency.
type scalingGrid struct{ Promotions, Concurrency []int }

var (
	// fullScaling is --scaling: 15 runs.
	fullScaling = scalingGrid{Promotions: []int{1, 2, 4, 8, 16}, Concurrency: []int{1, 4, 16}}
	// shortScaling is the default run's corner of it: 4 runs.
	shortScaling = scalingGrid{Promotions: []int{1, 16}, Concurrency: []int{4, 16}}
)

// scalingScope says what the scaling table measures.
const scalingScope = "Each row is one measured run (a warm-up, then about the run's duration of load) of unlimited promotions " +
	"through grab-service, the grants spread evenly over the promotions, each promotion on a shard of its own; its CPU per " +
	"GRANTED is every process of the stack's and the load generator's CPU during the run over its GRANTED answers (other " +
	"programs left out). \"vs 1 promotion\" is the row's total over the 1-promotion row at its concurrency; \"vs the highest " +
	"concurrency\" over the same promotion count's at the highest concurrency measured. The row of 1 promotion at the " +
	"hot phase's concurrency, when the grid lacks one, is the hot phase's median run. One run a row: on this shared " +
	"machine a row moves by a tenth or more from run to run."

// scaling is the scaling phase.
func (b *bench) scaling(ctx context.Context) error {
	grid := shortScaling
	if b.fullScaling {
		grid = fullScaling
	}
	top := 0
	for _, p := range grid.Promotions {
		top = max(top, p)
	}
	shards := make([]int, min(top, ring.Shards))
	for i := range shards {
		shards[i] = i
	}
	ids := idsOnShards(b.id+"-g", shards, 1)
	for _, id := range ids {
		if err := b.admin.create(ctx, id, unlimited); err != nil {
			return err
		}
		b.tally.track(id, unlimited)
	}
	for _, c := range grid.Concurrency {
		for _, p := range grid.Promotions {
			if err := ctx.Err(); err != nil {
				return err
			}
			b.settle(10 * time.Second)
			r := measure(ctx, b.spreadRunner(ids[:p]), fmt.Sprintf("%d promotions c=%d", p, c), c, b.dur)
			report(r.Summary)
			reportCPU(r, "GRANTED")
			b.res.Growth = append(b.res.Growth, capacity.GrowthPoint{Promotions: p, Concurrency: c,
				Granted: perSecond(r.Summary, "GRANTED"), PerGrant: stackPer(r.cpuPer("GRANTED"))})
		}
	}
	return nil
}

// spreadRunner grabs ids in turn, call n the promotion n mod len(ids).
func (b *bench) spreadRunner(ids []string) runner {
	pick := func(n int64) string { return ids[n%int64(len(ids))] }
	return httpRun(b.st.Grab, func(n int64) loadgen.Call { return grabCall(b.token, b.id+"g", pick(n), n) },
		func(n int64, a loadgen.Answer) { b.tally.seen(pick(n), n, a) })
}
