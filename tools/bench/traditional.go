package main

import (
	"context"
	"fmt"

	"github.com/flashsale/platform/tools/loadgen"
)

// traditional is scenario 3: the seed articles' design, one MySQL row locked per
// grab (SELECT ... FOR UPDATE, UPDATE, INSERT, COMMIT) behind an HTTP handler of
// ours on a free port, in the benchmark's own database; compared with the hot
// phase's GRANTED/s at the same concurrency.
func (b *bench) traditional(ctx context.Context, scratch *scratchDB) error {
	if b.res.HotGranted == 0 {
		return fmt.Errorf("needs the hot phase's figure: do not skip hot")
	}
	if err := setupLockDB(ctx, scratch.DB); err != nil {
		return err
	}
	base, stop, err := spawnBaseline(ctx, "lock", scratch.DSN, min(b.conc, 64))
	if err != nil {
		return err
	}
	defer stop()
	lock := b.turns(ctx, []string{"GRANTED"}, func() measured {
		return measure(ctx, httpRun(base, func(n int64) loadgen.Call { return grabCall(b.token, b.id+"m", "stock", n) }, nil),
			"MySQL row lock", b.conc, b.dur)
	})[0]
	b.res.add(ratioRow{N: 3, Scenario: "traditional design (MySQL row lock)", Ours: b.res.HotGranted,
		OursUnit: "GRANTED/s (hot phase)", Base: perSecond(lock.Summary, "GRANTED"), BaseUnit: "GRANTED/s by SELECT … FOR UPDATE",
		Target: 20, Detail: resultMix(lock.Summary)})
	b.res.addCPU(3, b.hotMeasured, lock, "3: grab-service (the hot phase), per GRANTED", "3: MySQL row lock, per GRANTED", "GRANTED")
	return nil
}
