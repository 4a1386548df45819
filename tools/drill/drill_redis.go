package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flashsale/platform/internal/promo"
)

// redisDrill loses a Redis shard (hung, then SIGKILLed, back empty) and rebuilds it
// under load with bin/recovery.
func redisDrill(ctx context.Context, d *drillEnv, rd *round, out *outcome) {
	shard := d.o.redisShard
	name := fmt.Sprintf("redis-%d", shard)
	held := d.holdsCanary(ctx, shard, out)
	if d.o.hang > 0 {
		d.hang(ctx, name, d.o.hang, out)
		sleep(ctx, d.o.hold)
	}
	if !d.killHard(name, out) {
		return
	}
	sleep(ctx, time.Second)
	// Restarted empty, as a lost master would be (markers included); the rebuild is
	// left to this drill rather than to stack.sh up, so the load meets the lost shard.
	if err := d.ctl.up(ctx, "FLASHSALE_NO_REBUILD=1"); err != nil {
		out.fail("restart %s: %v", name, err)
		return
	}
	if n, err := d.shards[shard].Exists(ctx, promo.BuiltKey(shard)).Result(); err != nil || n != 0 {
		out.fail("%s came back with its built marker (err %v): it did not lose its data", name, err)
	}
	d.awaitFenced(ctx, shard, fmt.Sprintf("the lost shard %d", shard), out)
	sleep(ctx, d.o.hold/2)
	t := time.Now()
	outb, err := d.recovery(ctx, "rebuild", "--shard", fmt.Sprint(shard), "--quiet")
	if err != nil {
		out.fail("bin/recovery rebuild --shard %d: %v: %s", shard, err, lastLine(outb))
		return
	}
	// Its exit means sales are back: grab-service serves the shard already.
	if fenced, err := fencedShards(d.ctl.st.Ops.Grab); err != nil || contains(fenced, shard) {
		out.fail("right after bin/recovery rebuild exited, grab-service still fences shard %d (fenced %v, err %v)", shard, fenced, err)
	}
	out.note("shard %d rebuilt by bin/recovery in %s while the load ran", shard, time.Since(t).Round(100*time.Millisecond))

	// The grabs' request index entries that lived on the lost server are back: a
	// retry of a grant must not meet the sold-out short-circuit without its claim.
	// The promotions' counters are the final checker's business (the load still runs).
	outb, _ = d.recovery(ctx, "verify", "--shard", fmt.Sprint(shard), "--index", "--quiet")
	for _, line := range strings.Split(string(outb), "\n") {
		if strings.HasPrefix(line, "DRIFT  request index") {
			out.fail("after the rebuild: %s", line)
		}
	}
	d.checkHolds(ctx, shard, held, out)
}
