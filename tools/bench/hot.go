package main

import (
	"context"
	"fmt"

	"github.com/flashsale/platform/tools/loadgen"
)

// hotID is the promotion of the hot phase, the spread table's single promotion
// and the latency run: stock that never runs out, no pin or ip limit.
// It lives on --hot-shard, so runs compare like with like.
func (b *bench) hotID() string {
	if b.hotPromo == "" {
		b.hotPromo = idsOnShards(b.id+"-hot", []int{b.hotShard}, 1)[0]
	}
	return b.hotPromo
}

// createHot creates the hot promotion unless an earlier scenario of this run did.
func (b *bench) createHot(ctx context.Context) error {
	if b.tally.told[b.hotID()] != nil {
		return nil
	}
	if err := b.admin.create(ctx, b.hotID(), unlimited); err != nil {
		return err
	}
	b.tally.track(b.hotID(), unlimited)
	return nil
}

// hotRun grabs the hot promotion through grab-service, its requestIds as
// --random-request-ids says.
func (b *bench) hotRun() runner { return b.hotRunIDs(randomRequestIDs) }

// hotRunIDs is hotRun with requestIds as they come (random) or derived beside
// the promotion.
func (b *bench) hotRunIDs(random bool) runner {
	id := b.hotID()
	return httpRun(b.st.Grab, func(n int64) loadgen.Call { return grabCallIDs(b.token, b.id, id, n, random) },
		func(n int64, a loadgen.Answer) { b.tally.seen(id, n, a) })
}

// idsText names how a run's requestIds are made, for its progress line.
func idsText(random bool) string {
	if random {
		return "random requestIds"
	}
	return "derived requestIds"
}

// hot is scenario 1: GRANTED/s end to end (HTTP, Redis, Kafka acknowledgement)
// against q.lua called by EVALSHA straight on the same Redis, same concurrency;
// and the hot phase run the other way of naming requests (random against derived
// requestIds: a random one's claim is a round trip to another shard), taking turns
// with the two.
func (b *bench) hot(ctx context.Context) error {
	if err := b.createHot(ctx); err != nil {
		return err
	}
	shard := shardOf(b.hotID())
	direct := idsOnShards(b.id+"-direct", []int{shard}, 1)[0]
	if err := b.admin.create(ctx, direct, unlimited); err != nil {
		return err
	}
	other := !randomRequestIDs
	m := b.turns(ctx, []string{"GRANTED"},
		func() measured {
			return measure(ctx, b.hotRun(), "grab-service, "+idsText(randomRequestIDs), b.conc, b.dur)
		},
		func() measured {
			return measure(ctx, directRun(b.shards[shard], b.id, direct), "EVALSHA q.lua", b.conc, b.dur)
		},
		func() measured {
			return measure(ctx, b.hotRunIDs(other), "grab-service, "+idsText(other), b.conc, b.dur)
		})
	ours, base, alt := m[0], m[1], m[2]
	for _, r := range []measured{ours, alt} {
		if 2*r.ByResult["GRANTED"] < r.Calls {
			return fmt.Errorf("grab-service granted %d of %d grabs of a promotion that cannot sell out (%s)", r.ByResult["GRANTED"], r.Calls, resultMix(r.Summary))
		}
	}
	// Its takes are never committed: deleting the promotion keeps them from the reconciler.
	if err := b.admin.remove(ctx, direct); err != nil {
		return err
	}
	b.res.HotGranted, b.hotMeasured = perSecond(ours.Summary, "GRANTED"), ours
	b.res.TargetRuns.Hot, b.res.TargetRuns.Direct = &ours, &base
	b.res.addCPU(1, ours, base, "1: grab-service, per GRANTED", "1: EVALSHA q.lua, per call", "GRANTED")
	b.res.add(ratioRow{N: 1, Scenario: fmt.Sprintf("hot phase, 1 promotion, shard %d", shard),
		Ours: b.res.HotGranted, OursUnit: "GRANTED/s via HTTP+Redis+Kafka",
		Base: perSecond(base.Summary, "GRANTED"), BaseUnit: "q.lua EVALSHA/s on one Redis",
		Target: 1.0, Detail: resultMix(ours.Summary) + " / " + resultMix(base.Summary)})
	b.addRandomIDs(shard, ours, alt)
	return nil
}

// addRandomIDs records the hot phase with random requestIds against derived ones,
// whichever of the two was the main run.
func (b *bench) addRandomIDs(shard int, ours, alt measured) {
	random, derived := alt, ours
	if randomRequestIDs {
		random, derived = ours, alt
	}
	b.res.TargetRuns.HotRandom, b.res.TargetRuns.HotDerived = &random, &derived
	b.res.addCPU(1, random, derived, "1: grab-service, random requestIds, per GRANTED", "1: grab-service, derived requestIds, per GRANTED", "GRANTED")
	b.res.add(ratioRow{N: 1, Scenario: fmt.Sprintf("hot phase, 1 promotion, shard %d: random requestIds vs derived ones", shard),
		Ours: perSecond(random.Summary, "GRANTED"), OursUnit: "GRANTED/s, requestIds as they come",
		Base: perSecond(derived.Summary, "GRANTED"), BaseUnit: "GRANTED/s, requestIds beside their promotion",
		Target: 0.9, Detail: "random requestIds " + resultMix(random.Summary) + " / derived " + resultMix(derived.Summary)})
}
