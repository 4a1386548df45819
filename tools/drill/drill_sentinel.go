package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardmark"
	"github.com/flashsale/platform/internal/shardpool"
)

// sentinelAim is how soon after the kill the shard should grant again; serveBound
// is when the drill gives up on it.
const (
	sentinelAim   = 10 * time.Second
	sentinelBound = 90 * time.Second
)

// sentinelDrill SIGKILLs a shard's master at the stack's peak and does nothing
// else: the sentinels promote its replica, the services follow them, grab-service
// fences the promoted replica (its built marker names the dead master) and the
// flow sink's healer rebuilds it from the record. It measures the seconds from the
// kill until a grab on the shard is GRANTED again.
func sentinelDrill(ctx context.Context, d *drillEnv, rd *round, out *outcome) {
	st := d.ctl.st
	if len(st.Sentinels) == 0 || len(st.Replicas) != ring.Shards {
		out.fail("the stack runs no sentinels: run it with FLASHSALE_REPLICAS=1 (make drill does, for this drill)")
		return
	}
	shard := d.o.redisShard
	name, addr, err := masterOf(ctx, st.Sentinels, st.SentinelPrefix, shard, st.Redis, st.Replicas)
	if err != nil {
		out.fail("which server is shard %d's master: %v", shard, err)
		return
	}
	target, ok := saleOn(rd, shard)
	if !ok {
		out.fail("the round has no promotion on shard %d", shard)
		return
	}
	start := time.Now()
	if !d.killHard(name, out) {
		return
	}
	served := d.grantsAgain(ctx, rd, target, start)
	if served <= 0 {
		out.fail("shard %d did not grant again within %s of its master's SIGKILL: no one woken did not heal it", shard, sentinelBound)
		return
	}
	now, nowAddr, _ := masterOf(ctx, st.Sentinels, st.SentinelPrefix, shard, st.Redis, st.Replicas)
	out.note("shard %d granted again %.1f s after its master %s (%s) was SIGKILLed; the sentinels' master is now %s (%s)%s",
		shard, served.Seconds(), name, addr, now, nowAddr, overAim(served))
	d.checkWhole(ctx, st.Sentinels, st.SentinelPrefix, shard, out)
	// The dead server back, empty: the sentinels make it a replica of the new master.
	if err := d.ctl.up(ctx); err != nil {
		out.fail("restart %s: %v", name, err)
	}
}

// grantsAgain probes the shard's promotion until a grab is GRANTED and answers how
// long after start that was (0: not within sentinelBound).
func (d *drillEnv) grantsAgain(ctx context.Context, rd *round, s sale, start time.Time) time.Duration {
	for time.Since(start) < sentinelBound && ctx.Err() == nil {
		if r := d.load.probe(rd, s); r.result == "GRANTED" {
			return time.Since(start)
		}
		sleep(ctx, 50*time.Millisecond)
	}
	return 0
}

// checkWhole checks the shard's new master holds a built marker of its own.
func (d *drillEnv) checkWhole(ctx context.Context, sentinels []string, prefix string, shard int, out *outcome) {
	s := shardpool.NewSentinels(sentinels, prefix, redis.Options{})
	defer s.Close()
	masters, err := s.Masters(ctx)
	if err != nil {
		out.fail("sentinels: %v", err)
		return
	}
	c := redis.NewClient(&redis.Options{Addr: masters[shard], Protocol: shardpool.Protocol})
	defer c.Close()
	if st, err := shardmark.Read(ctx, c, shard); err != nil || st.Built != shardmark.Whole {
		out.fail("shard %d's new master %s is not whole after it granted again: %+v (err %v)", shard, masters[shard], st, err)
	}
}

// masterOf names the stack component the sentinels hold for shard's master.
func masterOf(ctx context.Context, sentinels []string, prefix string, shard int, masters, replicas []string) (name, addr string, err error) {
	s := shardpool.NewSentinels(sentinels, prefix, redis.Options{})
	defer s.Close()
	elected, err := s.Masters(ctx)
	if err != nil {
		return "", "", err
	}
	addr = elected[shard]
	switch {
	case sameAddr(addr, masters[shard]):
		return fmt.Sprintf("redis-%d", shard), addr, nil
	case sameAddr(addr, replicas[shard]):
		return fmt.Sprintf("replica-%d", shard), addr, nil
	}
	return "", addr, fmt.Errorf("the sentinels name %q, neither redis-%d nor replica-%d", addr, shard, shard)
}

func sameAddr(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	return pa == pb && (ha == hb || net.ParseIP(ha).IsLoopback() && net.ParseIP(hb).IsLoopback())
}

// saleOn is a promotion of the round with plenty of stock on shard.
func saleOn(rd *round, shard int) (sale, bool) {
	for _, s := range rd.other {
		if s.kind == big && ring.Default.Shard(s.Key()) == shard {
			return s, true
		}
	}
	return sale{}, false
}

func overAim(d time.Duration) string {
	if d > sentinelAim {
		return fmt.Sprintf(" (over the %s aim)", sentinelAim)
	}
	return ""
}
