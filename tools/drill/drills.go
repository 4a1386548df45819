package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/tools/checker"
	"github.com/flashsale/platform/tools/loadgen"
)

// drill is one fault drill. run injects its faults while the load runs and reports
// what it did and any drill-specific failure (checks) in out.
type drill struct {
	name, title string
	short       bool // part of the --short suite
	run         func(ctx context.Context, d *drillEnv, rd *round, out *outcome)
	saturate    bool // under a load at the stack's peak, not the steady rate
}

// outcome is what a drill reports besides the load and the checker.
type outcome struct {
	mu       sync.Mutex
	faults   int
	bad      int
	checks   []string // drill-specific failures
	notes    []string // facts worth printing that are not failures
	canaries []checker.Promotion
}

func (o *outcome) fail(format string, args ...any) {
	o.mu.Lock()
	o.checks = append(o.checks, fmt.Sprintf(format, args...))
	o.mu.Unlock()
}

func (o *outcome) note(format string, args ...any) {
	o.mu.Lock()
	o.notes = append(o.notes, fmt.Sprintf(format, args...))
	o.mu.Unlock()
}

func allDrills() []drill {
	return []drill{
		{"hostile", "hostile-input storm", true, hostileDrill, false},
		{"kafka", "Kafka broker killed mid-sale, back after a pause", true, kafkaDrill, false},
		{"crash", "grab-service (now and then the flow sink too) SIGKILLed mid-load, restarted", true, crashDrill, false},
		// The same two faults at saturation: grabs share pipelines, one round trip
		// per shard for many, so a crash or a lost broker hits many grabs in flight at once.
		{"kafka-sat", "the Kafka drill at saturation (no pace: the stack's peak)", true, kafkaDrill, true},
		{"crash-sat", "the crash drill at saturation (no pace: the stack's peak)", true, crashDrill, true},
		{"redis", "a Redis shard SIGKILLed, back empty, rebuilt under load", true, redisDrill, false},
		{"replica", "a Redis shard's master lost, a lagging replica promoted in its place, rebuilt", true, replicaDrill, false},
		{"mysql", "MariaDB stopped while the flow sink runs", false, mysqlDrill, false},
		{"config", "switches flipped mid-load", true, configDrill, false},
		{"failover", "two grab-services behind a proxy, one killed", false, failoverDrill, false},
	}
}

func drillNames() []string {
	var out []string
	for _, d := range allDrills() {
		out = append(out, d.name)
	}
	return out
}

func selectDrills(o options) ([]drill, error) {
	all := allDrills()
	if o.only == "" {
		var out []drill
		for _, d := range all {
			if d.short || !o.short {
				out = append(out, d)
			}
		}
		return out, nil
	}
	var out []drill
	for _, name := range strings.Split(o.only, ",") {
		found := false
		for _, d := range all {
			if d.name == strings.TrimSpace(name) {
				out = append(out, d)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no drill %q (have %s)", name, strings.Join(drillNames(), ", "))
		}
	}
	return out, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// runDrill sells a fresh round under load, runs the drill, stops the load, lets the
// stack settle and checks every promotion and request so far.
func (d *drillEnv) runDrill(ctx context.Context, dr drill) row {
	start := time.Now()
	r := row{name: dr.name, title: dr.title, st: newStats()}
	d.logf("== %s: %s", dr.name, dr.title)
	rd, err := newRound(ctx, d.ctl.st.Admin, d.admin, d.run, dr.name, 40, d.o.redisShard)
	if err != nil {
		r.checks = append(r.checks, "round not created: "+err.Error())
		r.elapsed = time.Since(start)
		return r
	}
	d.rounds = append(d.rounds, rd)
	var out outcome
	lr := d.load.start(rd, d.shapeOf(dr))
	sleep(ctx, d.o.hold)
	dr.run(ctx, d, rd, &out)
	sleep(ctx, d.o.hold)
	r.st = lr.stop()
	if len(out.canaries) > 0 {
		d.rounds = append(d.rounds, &round{name: dr.name + "-canary", sales: salesOf(out.canaries)})
	}
	r.faults, r.bad, r.checks, r.notes = out.faults, out.bad, out.checks, out.notes
	r.checks = append(r.checks, wrongAnswers(d.load.requests(), start)...)

	promos := d.promotions()
	if err := d.src.Settle(ctx, promos, d.o.settle); err != nil {
		r.notes = append(r.notes, "did not settle within "+d.o.settle.String()+": "+err.Error())
	}
	snap, err := d.src.Read(ctx, promos)
	if err != nil {
		r.checks = append(r.checks, "checker could not read the stack: "+err.Error())
	} else {
		r.rep = checker.Verify(promos, d.load.requests(), snap)
		r.checked = true
		note, exercised := poolOutcome(rd.pool, d.load.requests(), snap)
		r.notes = append(r.notes, note)
		if !exercised {
			r.checks = append(r.checks, "the round's envelope pool "+rd.pool.Key()+" granted no envelope: the drill did not exercise it")
		}
		d.logf("%s: %s", dr.name, r.rep.String())
	}
	r.findings = append(append([]string(nil), r.checks...), r.rep.Findings...)
	r.elapsed = time.Since(start)
	for _, n := range r.notes {
		d.logf("%s note: %s", dr.name, n)
	}
	for _, c := range r.checks {
		d.logf("%s FAILED check: %s", dr.name, c)
	}
	return r
}

// poolOutcome describes what the round's envelope pool handed out, by the clients'
// answers and by the record, and reports whether any envelope was granted.
func poolOutcome(pool sale, reqs []checker.Request, snap checker.Snapshot) (string, bool) {
	key := pool.Key()
	var granted, returned, toldAmount int64
	for _, r := range reqs {
		for _, it := range r.Items {
			if it.Key() != key || r.Grab != "GRANTED" {
				continue
			}
			granted += it.Num
			if held, _ := r.Held(); held {
				toldAmount += it.Amount
			} else {
				returned += it.Num
			}
		}
	}
	var recorded int64
	for _, row := range snap.Record[key] {
		if row.Kind == "GRAB" {
			recorded += row.Amount
		} else {
			recorded -= row.Amount
		}
	}
	st := snap.Redis[key]
	return fmt.Sprintf("envelope pool %s: %d envelopes granted, %d returned, %d of %d left; held by the clients' answers %d, by the record %d, envLeft %d, of the budget %d",
		key, granted, returned, st.Remaining, pool.Total, toldAmount, recorded, st.EnvLeft, pool.EnvelopeAmount), granted > 0
}

// shapeOf is the load a drill runs under: the steady rate, or for a saturation
// drill as many grabs as the workers get answered, from buyers enough that the
// per-pin and per-ip limits of the big promotions do not end the sale early.
func (d *drillEnv) shapeOf(dr drill) shape {
	if dr.saturate {
		return shape{workers: d.o.satWorkers, pins: 50_000, ips: 10_000}
	}
	return shape{perSecond: d.o.rate, workers: d.o.workers, pins: 600, ips: 120}
}

func salesOf(ps []checker.Promotion) []sale {
	out := make([]sale, len(ps))
	for i, p := range ps {
		out[i] = sale{Promotion: p}
	}
	return out
}

// ---- 1. Kafka ---------------------------------------------------------------------

func kafkaDrill(ctx context.Context, d *drillEnv, rd *round, out *outcome) {
	addr := d.ctl.st.Kafka[0]
	atRisk := func() {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if lag, err := checker.SinkLag(lctx, d.ctl.st.Kafka); err == nil {
			out.note("at the kill the flow sink had not committed %d events (the restarted broker must hand every one of them over)", lag)
		}
	}
	// First a hung broker (SIGSTOP): connections open, nothing answered. Every
	// write must time out and roll back, and what the broker does with the requests
	// it finds in its sockets when it resumes must not break the record.
	if d.o.hang > 0 {
		d.hang(ctx, "kafka", d.o.hang, out)
		sleep(ctx, d.o.hold)
	}
	// Then the broker dies while the flow sink is behind: frozen for a while first, so
	// the grants acknowledged meanwhile live in the broker alone. The restarted
	// broker must hand every one of them to the sink (the checker excuses nothing).
	sinkPid, err := d.ctl.kill("flow-sink", syscall.SIGSTOP)
	if err != nil {
		out.fail("freeze the flow sink: %v", err)
		return
	}
	out.faults++
	d.logf("kafka: flow sink (pid %d) frozen for %s before the broker's kill", sinkPid, d.o.hold)
	sleep(ctx, d.o.hold)
	var pid int
	if ctx.Err() == nil {
		atRisk()
		pid, err = d.ctl.kill("kafka", syscall.SIGKILL)
	}
	if terr := syscall.Kill(sinkPid, syscall.SIGCONT); terr != nil { // on every path: a frozen sink stalls later drills
		out.fail("thaw the flow sink (pid %d): %v", sinkPid, terr)
	}
	if err != nil {
		out.fail("kill the broker: %v", err)
	}
	if pid == 0 {
		return
	}
	down := time.Now()
	if !waitGone(pid, 10*time.Second) || !waitClosed(addr, 5*time.Second) {
		out.fail("the broker (pid %d) still answers on %s after SIGKILL", pid, addr)
	}
	out.faults++
	d.logf("kafka: broker pid %d killed; down for %s", pid, d.o.kafkaDown)
	sleep(ctx, d.o.kafkaDown)
	if err := d.ctl.up(ctx); err != nil {
		out.fail("restart the broker: %v", err)
	}
	up := time.Now()
	caught := d.watchCatchUp(ctx, up)
	d.logf("kafka: broker back (pid %d) after %s", d.ctl.st.Pids["kafka"], up.Sub(down).Round(time.Millisecond))
	// The load itself shows whether selling resumed: it must, within a few seconds.
	if !d.waitGranted(ctx, rd, 15*time.Second) {
		out.fail("no grab granted within 15 s of the broker's return")
	}
	if !d.o.degradePhase {
		sinkCaughtUp(caught, out)
		return
	}

	// Then what on-call does about a long outage: degrade to MySQL while Kafka is
	// down, and back once it returns. Selling must go on throughout.
	sleep(ctx, d.o.hold)
	sinkCaughtUp(caught, out)
	path := d.ctl.st.SwitchesFile
	orig, sw, ok := readSwitches(path, out)
	if !ok {
		return
	}
	atRisk()
	pid, err = d.ctl.kill("kafka", syscall.SIGKILL)
	if err != nil {
		out.fail("kill the broker: %v", err)
		return
	}
	waitGone(pid, 10*time.Second)
	out.faults++
	degraded := sw
	degraded.KafkaDegrade = true
	if err := writeSwitches(path, encodeSwitches(degraded)); err != nil {
		out.fail("switch kafkaDegrade on: %v", err)
	}
	out.faults++
	d.logf("kafka: broker pid %d killed again, kafkaDegrade on", pid)
	if !d.waitGranted(ctx, rd, 5*time.Second) {
		out.fail("degraded to MySQL with Kafka down, no grab granted within 5 s")
	}
	sleep(ctx, d.o.kafkaDown)
	if err := d.ctl.up(ctx); err != nil {
		out.fail("restart the broker: %v", err)
	}
	sleep(ctx, d.o.hold/2)
	if err := writeSwitches(path, orig); err != nil {
		out.fail("switch kafkaDegrade off: %v", err)
	}
	d.logf("kafka: broker back (pid %d), kafkaDegrade off", d.ctl.st.Pids["kafka"])
	if !d.waitGranted(ctx, rd, 15*time.Second) {
		out.fail("no grab granted within 15 s of the switch back to Kafka")
	}
}

// waitGranted probes until a grab is GRANTED (selling works again).
func (d *drillEnv) waitGranted(ctx context.Context, rd *round, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		big := rd.other[rand.IntN(len(rd.other))]
		if r := d.load.probe(rd, big); r.result == "GRANTED" {
			return true
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return false
}

// ---- 2. grab-service crashes -------------------------------------------------------

func crashDrill(ctx context.Context, d *drillEnv, rd *round, out *outcome) {
	path := d.ctl.st.SwitchesFile
	orig, sw, ok := readSwitches(path, out)
	if !ok {
		return
	}
	degraded := sw
	degraded.KafkaDegrade = true
	defer func() {
		if err := writeSwitches(path, orig); err != nil {
			out.fail("restore the switches file: %v", err)
		}
	}()
	for i := 0; i < d.o.crashes && ctx.Err() == nil; i++ {
		// Every third crash happens while flows go straight to MySQL (kafkaDegrade),
		// whose crash window differs: the GRAB is in the record before the commit.
		degrade := i%3 == 1
		if degrade {
			if err := writeSwitches(path, encodeSwitches(degraded)); err != nil {
				out.fail("crash %d: switch kafkaDegrade on: %v", i+1, err)
			}
		}
		sleep(ctx, time.Duration(500+rand.IntN(1000))*time.Millisecond)
		victims := []string{"grab-service"}
		if i%4 == 2 { // and now and then the flow sink dies with it, mid-batch
			victims = append(victims, "flow-sink")
		}
		for _, name := range victims {
			pid, err := d.ctl.kill(name, syscall.SIGKILL)
			if err != nil {
				out.fail("crash %d: %v", i+1, err)
				return
			}
			if !waitGone(pid, 5*time.Second) {
				out.fail("crash %d: %s pid %d survived SIGKILL", i+1, name, pid)
			}
			out.faults++
		}
		t := time.Now()
		if err := d.ctl.up(ctx); err != nil {
			out.fail("crash %d: restart: %v", i+1, err)
			return
		}
		d.logf("crash %d: %v killed (kafkaDegrade %v), back after %s", i+1, victims, degrade, time.Since(t).Round(time.Millisecond))
		if degrade {
			sleep(ctx, time.Second)
			if err := writeSwitches(path, orig); err != nil {
				out.fail("crash %d: switch kafkaDegrade off: %v", i+1, err)
			}
		}
	}
}

// ---- 3. Redis shard lost and rebuilt -----------------------------------------------

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
	if fenced, err := fencedShards(d.ctl.st.Grab); err != nil || contains(fenced, shard) {
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

// killHard SIGKILLs component name and waits until it is gone (a fault counted); it
// reports whether the kill was sent.
func (d *drillEnv) killHard(name string, out *outcome) bool {
	pid, err := d.ctl.kill(name, syscall.SIGKILL)
	if err != nil {
		out.fail("kill %s: %v", name, err)
		return false
	}
	if !waitGone(pid, 5*time.Second) {
		out.fail("%s pid %d survived SIGKILL", name, pid)
	}
	out.faults++
	return true
}

// awaitFenced asks grab-service until it fences shard: it finds a marker change
// within its poll interval, which a busy machine may stretch, so ask for up to 5 s
// (or until it plainly never will).
func (d *drillEnv) awaitFenced(ctx context.Context, shard int, what string, out *outcome) {
	var fenced []int
	var err error
	for start := time.Now(); time.Since(start) < 5*time.Second && ctx.Err() == nil; sleep(ctx, 100*time.Millisecond) {
		if fenced, err = fencedShards(d.ctl.st.Grab); err == nil && contains(fenced, shard) {
			return
		}
	}
	out.fail("grab-service does not fence %s within 5 s (fenced %v, err %v)", what, fenced, err)
}

// recovery runs bin/recovery args against the stack and logs what it printed.
func (d *drillEnv) recovery(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(d.o.root, "bin", "recovery"), append(args, "--stack", d.o.stackFile)...)
	cmd.Dir = d.o.root
	t := time.Now()
	outb, err := cmd.CombinedOutput()
	d.logf("recovery %s (%s, err %v):\n%s", strings.Join(args, " "), time.Since(t).Round(time.Millisecond), err, outb)
	return outb, err
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// ---- 4. MariaDB stopped ------------------------------------------------------------

func mysqlDrill(ctx context.Context, d *drillEnv, rd *round, out *outcome) {
	d.logf("mysql: stopping with %q", d.o.mysqlStop)
	if b, err := exec.CommandContext(ctx, "sh", "-c", d.o.mysqlStop).CombinedOutput(); err != nil {
		out.fail("stop MariaDB (%s): %v: %s", d.o.mysqlStop, err, b)
		return
	}
	down := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := d.db.Ping(pctx)
	cancel()
	if err == nil {
		out.fail("MariaDB still answers after %q", d.o.mysqlStop)
	} else {
		out.faults++
	}
	sleep(ctx, d.o.mysqlDown)
	d.logf("mysql: starting with %q", d.o.mysqlStart)
	if b, err := exec.CommandContext(context.WithoutCancel(ctx), "sh", "-c", d.o.mysqlStart).CombinedOutput(); err != nil {
		out.fail("start MariaDB (%s): %v: %s", d.o.mysqlStart, err, b)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := d.db.Ping(pctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			out.fail("MariaDB not back 90 s after %q: %v", d.o.mysqlStart, err)
			return
		}
		sleep(ctx, 250*time.Millisecond)
	}
	up := time.Now()
	granted := 0
	for _, r := range d.load.requests() {
		if r.Sent.After(down) && r.Done.Before(up) && r.Grab == "GRANTED" {
			granted++
		}
	}
	out.note("MariaDB down %s; %d grabs granted meanwhile (the grab path does not need it)", up.Sub(down).Round(100*time.Millisecond), granted)
	if granted == 0 {
		out.fail("no grab was granted while MariaDB was down: the grab path must not depend on it")
	}
}

// ---- 5. switches -------------------------------------------------------------------

// applyWithin is the contract's bound on a switch change reaching an instance.
const applyWithin = time.Second

func configDrill(ctx context.Context, d *drillEnv, rd *round, out *outcome) {
	path := d.ctl.st.SwitchesFile
	orig, base, ok := readSwitches(path, out)
	if !ok {
		return
	}
	defer func() {
		if err := writeSwitches(path, orig); err != nil {
			out.fail("restore the switches file: %v", err)
		}
	}()
	write := func(what string, s configcenter.Switches) time.Time {
		if err := writeSwitches(path, encodeSwitches(s)); err != nil {
			out.fail("%s: write the switches file: %v", what, err)
		}
		out.faults++
		d.logf("config: %s", what)
		return time.Now()
	}
	target := rd.other[0]
	// wait probes target until match(reply) and checks the switch applied in time.
	// A breach is a probe sent more than applyWithin after the change that still saw
	// the old behaviour: how long a probe then takes to answer is the machine's.
	wait := func(what string, since time.Time, match func(reply) bool) time.Time {
		var missed time.Duration // when the last probe that saw the old behaviour was sent
		for time.Since(since) < 5*time.Second && ctx.Err() == nil {
			sent := time.Since(since)
			if r := d.load.probe(rd, target); match(r) {
				if missed > applyWithin {
					out.fail("%s: a probe sent %s after the change still saw the old behaviour (contract: within 1 s)", what, missed.Round(time.Millisecond))
				} else {
					out.note("%s applied in %s", what, sent.Round(time.Millisecond))
				}
				return time.Now()
			}
			missed = sent
			sleep(ctx, 20*time.Millisecond)
		}
		out.fail("%s: not applied within 5 s", what)
		return time.Now()
	}

	// Degrade on and off.
	s := base
	s.KafkaDegrade, s.DegradeRateFactor = true, 0.5
	write("kafkaDegrade on, rate factor 0.5", s)
	sleep(ctx, 2*time.Second)
	write("kafkaDegrade off", base)
	sleep(ctx, time.Second)

	// A promotion blocked, then unblocked.
	s = base
	s.BlockedPromotions = append(append([]string(nil), base.BlockedPromotions...), fmt.Sprintf("%s_%d", target.PromoID, target.Type))
	t := write("block "+target.Key(), s)
	applied := wait("block", t, func(r reply) bool { return r.result == "STOPPED" })
	sleep(ctx, 2*time.Second)
	unblocking := write("unblock "+target.Key(), base)
	wait("unblock", unblocking, func(r reply) bool { return r.result != "STOPPED" && r.status != 0 })
	for _, r := range d.load.requests() {
		if r.Grab != "GRANTED" || !r.Sent.After(applied) || !r.Done.Before(unblocking) {
			continue
		}
		for _, it := range r.Items {
			if it.Key() == target.Key() {
				out.fail("%s granted %s while it was blocked", r.RequestID, target.Key())
			}
		}
	}

	// Bots banned by pin and by address range, and let go: the probes (10.97.x.x)
	// and the load's 10.2.x.x buyers by range, 100 of the load's pins by name.
	s = base
	s.BlockedIPs = []string{"10.97.0.0/16", "10.2.0.0/16"}
	bannedPins := map[string]bool{}
	for u := range 100 {
		pin := fmt.Sprintf("%s-%s-u%d", d.run, rd.name, u)
		bannedPins[pin] = true
		s.BlockedPins = append(s.BlockedPins, pin)
	}
	t = write("ban 100 pins and 10.97.0.0/16, 10.2.0.0/16", s)
	banned := wait("ban", t, func(r reply) bool { return r.result == "BLOCKED" })
	sleep(ctx, 2*time.Second)
	lifting := write("lift the bans", base)
	wait("bans lifted", lifting, func(r reply) bool { return r.result != "BLOCKED" && r.status != 0 })
	blockedAnswers := 0
	for _, r := range d.load.requests() {
		if !r.Sent.After(banned) || !r.Done.Before(lifting) {
			continue
		}
		switch {
		case r.Grab == "BLOCKED":
			blockedAnswers++
		case r.Grab == "GRANTED" && (bannedPins[r.Pin] || strings.HasPrefix(r.IP, "10.2.") || strings.HasPrefix(r.IP, "10.97.")):
			out.fail("%s by %s from %s granted while banned", r.RequestID, r.Pin, r.IP)
		}
	}
	out.note("%d grabs answered BLOCKED while the bans held", blockedAnswers)

	// Method limits changed, and back.
	s = base
	s.MethodLimits = configcenter.MethodLimits{Grab: 20, Cancel: 5}
	t = write("methodLimits grab 20/s, cancel 5/s", s)
	wait("method limits", t, func(r reply) bool {
		return r.status == http.StatusTooManyRequests && strings.Contains(r.message, "method rate limit")
	})
	sleep(ctx, 2*time.Second)
	t = write("methodLimits off", base)
	wait("method limits off", t, func(r reply) bool { return r.status != http.StatusTooManyRequests && r.status != 0 })

	// Grabs switched off, and on.
	s = base
	s.GrabEnabled = false
	t = write("grabEnabled off", s)
	wait("grabs off", t, func(r reply) bool { return r.result == "DEGRADED" })
	sleep(ctx, time.Second)
	t = write("grabEnabled on", base)
	wait("grabs on", t, func(r reply) bool { return r.result != "DEGRADED" && r.status != 0 })

	// The target's shard moved to another name of its own server (the replica drill
	// moves one to a promoted replica): grab-service follows within a second,
	// rereads the server's markers, and sells on; then back to its flags' address.
	shard := ring.Default.Shard(target.Key())
	_, port, _ := net.SplitHostPort(d.ctl.st.Redis[shard])
	alias := net.JoinHostPort("localhost", port)
	for _, to := range []string{alias, ""} {
		s = base
		if to != "" {
			s.ShardAddrs = map[string]string{strconv.Itoa(shard): to}
		}
		what := fmt.Sprintf("shard %d to %s", shard, cmp.Or(to, "its flags' address"))
		t = write(what, s)
		for addr, err := shardAddrOf(d.ctl.st.Grab, shard); addr != to || err != nil; addr, err = shardAddrOf(d.ctl.st.Grab, shard) {
			if time.Since(t) > 5*time.Second || ctx.Err() != nil {
				out.fail("%s: grab-service's /readyz still shows %q after 5 s (err %v)", what, addr, err)
				break
			}
			sleep(ctx, 20*time.Millisecond)
		}
		if took := time.Since(t); took > applyWithin {
			out.fail("%s: followed after %s (contract: within 1 s)", what, took.Round(time.Millisecond))
		} else {
			out.note("%s followed in %s", what, took.Round(time.Millisecond))
		}
		wait(what+", selling", time.Now(), func(r reply) bool { return r.status != 0 && r.status != http.StatusServiceUnavailable })
		sleep(ctx, time.Second)
	}

	// A malformed document is rejected whole; the last good one stays.
	for i, bad := range []string{`{"grabEnabled": false, "bogus": 1}`, `{"grabEnabled": false`, `{"grabEnabled": false, "degradeRateFactor": 7}`} {
		if err := writeSwitches(path, []byte(bad)); err != nil {
			out.fail("write a malformed document: %v", err)
		}
		out.faults++
		sleep(ctx, 700*time.Millisecond)
		for k := 0; k < 5; k++ {
			if r := d.load.probe(rd, target); r.result == "DEGRADED" {
				out.fail("malformed document #%d was applied: grabs answer DEGRADED", i)
				break
			}
		}
	}
	if err := writeSwitches(path, orig); err != nil {
		out.fail("restore the switches file: %v", err)
	}
	sleep(ctx, 500*time.Millisecond)
}

// ---- 6. two instances, one killed --------------------------------------------------

func failoverDrill(ctx context.Context, d *drillEnv, rd *round, out *outcome) {
	in, err := d.ctl.startGrabInstance()
	if err != nil {
		out.fail("start a second grab-service: %v", err)
		return
	}
	d.extra = in
	stackGrab := d.ctl.st.Grab
	d.proxy.setBackends(stackGrab, in.base)
	f0, e0 := d.proxy.failovers.Load(), d.proxy.failed.Load()
	sleep(ctx, d.o.hold)
	pid, err := d.ctl.kill("grab-service", syscall.SIGKILL)
	if err != nil {
		out.fail("kill the stack's grab-service: %v", err)
	} else {
		waitGone(pid, 5*time.Second)
		out.faults++
	}
	sleep(ctx, d.o.hold)
	if err := d.ctl.up(ctx); err != nil {
		out.fail("restart grab-service: %v", err)
	}
	sleep(ctx, d.o.hold)
	// The second instance is stopped gracefully: it must stop accepting, finish the
	// grabs in flight, flush its Kafka writer and exit 0 within its grace period.
	e1 := d.proxy.failed.Load()
	t := time.Now()
	exitErr, inTime := in.stop(syscall.SIGTERM, 15*time.Second)
	d.extra = nil
	out.faults++
	switch {
	case !inTime:
		out.fail("graceful shutdown: the second grab-service did not exit within 15 s of SIGTERM")
	case exitErr != nil:
		out.fail("graceful shutdown: the second grab-service exited with %v", exitErr)
	default:
		out.note("second instance stopped by SIGTERM in %s", time.Since(t).Round(time.Millisecond))
	}
	sleep(ctx, d.o.hold/2)
	d.proxy.setBackends(stackGrab)
	out.note("proxy: %d requests failed over to the other instance, %d answered 502 (retried by the client), %d of them during the graceful stop",
		d.proxy.failovers.Load()-f0, d.proxy.failed.Load()-e0, d.proxy.failed.Load()-e1)
}

// ---- 7. hostile input --------------------------------------------------------------

// createCanary creates p, a promotion of the drill's own that no load touches, on
// sale for six hours, and has the checker check it with the rest.
func (d *drillEnv) createCanary(ctx context.Context, p checker.Promotion, maxPerGrab int, title string, out *outcome) bool {
	body := map[string]any{"promoId": p.PromoID, "type": p.Type, "title": title, "total": p.Total, "perPinLimit": p.PerPin,
		"perIpLimit": p.PerIP, "maxPerGrab": maxPerGrab, "startAt": time.Now().UTC().Add(-5 * time.Second).Format(time.RFC3339),
		"endAt": time.Now().UTC().Add(6 * time.Hour).Format(time.RFC3339)}
	a := loadgen.Do(ctx, loadgen.Client(1, 15*time.Second), d.ctl.st.Admin, loadgen.Call{Method: "POST", Path: "/v1/promotions", Body: body, Token: d.admin})
	if a.Status != http.StatusCreated {
		out.fail("create the %s: %d %s", title, a.Status, a.Body)
		return false
	}
	out.canaries = append(out.canaries, p)
	return true
}

func hostileDrill(ctx context.Context, d *drillEnv, rd *round, out *outcome) {
	canary := sale{Promotion: checker.Promotion{PromoID: d.run + "-canary", Type: 1, Total: 100, PerPin: 2, PerIP: 5}}
	client := loadgen.Client(16, 15*time.Second)
	if !d.createCanary(ctx, canary.Promotion, 2, "drill canary", out) {
		return
	}
	g1 := d.load.legit(canary, d.run+"-canary-pin1", "10.98.0.1", false)
	g2 := d.load.legit(canary, d.run+"-canary-pin2", "10.98.0.2", true)
	if g1.Grab != "GRANTED" || g2.Grab != "GRANTED" || g2.Cancel != "RETURNED" {
		out.fail("canary set-up: grab %s, grab %s then cancel %s", g1.Grab, g2.Grab, g2.Cancel)
		return
	}
	key := canary.Key()
	shard := d.src.Shards[ringShard(key)]
	before, err := readCanary(ctx, shard, key)
	if err != nil {
		out.fail("read the canary: %v", err)
		return
	}

	cases := hostileCases(d.run, d.checkout, d.viewer, d.admin, canary, g1, g2)
	bases := map[string]string{"grab": d.ctl.st.Grab, "admin": d.ctl.st.Admin}
	var res hostileResult
	var mu sync.Mutex
	var slowTried int
	var slowHeld []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// ReadHeaderTimeout (2 s) ends a slow header, ReadTimeout (5 s) a slow body.
		slowTried, slowHeld = slowClients(strings.TrimPrefix(d.ctl.st.Grab, "http://"), 40, 7*time.Second)
	}()
	jobs := make(chan hostileCase)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				res.send(client, bases, c, &mu)
			}
		}()
	}
	for rep := 0; rep < 3; rep++ {
		for _, c := range cases {
			jobs <- c
		}
	}
	close(jobs)
	wg.Wait()
	// A raw request smuggling a grab must not grant it: its body is a valid grab.
	smuggled := string(grabJSON(q(d.run+"-hx-199"), q(d.run+"-hostile"), q("10.99.0.1"), fmt.Sprintf(`[{"promoId":%s,"type":1,"num":1}]`, q(canary.PromoID))))
	host := strings.TrimPrefix(d.ctl.st.Grab, "http://")
	for name, raw := range rawCases(host, smuggled) {
		res.tried++
		code, err := sendRaw(host, raw)
		// The one 5xx allowed: net/http refuses an HTTP version it does not speak with
		// 505 before any request exists (RFC 9110, 15.6.6); no handler, no metric,
		// no state is reached.
		if name == "raw: unknown protocol version" && code == http.StatusHTTPVersionNotSupported {
			continue
		}
		if err != nil || code < 400 || code > 499 {
			res.find("%s: answered %d (err %v), want a 4xx", name, code, err)
		}
	}
	out.bad = res.tried + slowTried
	for _, f := range res.findings {
		out.fail("%s", f)
	}
	for _, f := range slowHeld {
		out.fail("%s", f)
	}

	// Nothing changed: the canary, the request index, the record, promo-admin.
	after, err := readCanary(ctx, shard, key)
	if err != nil {
		out.fail("read the canary: %v", err)
		return
	}
	for _, diff := range diffCanary(before, after) {
		out.fail("bad input changed state: %s", diff)
	}
	for i := 1; i <= 200; i++ {
		rid := fmt.Sprintf("%s-hx-%d", d.run, i)
		if n, _ := indexShard(d.src.Shards, rid).Exists(ctx, promo.RequestIndexKey(rid)).Result(); n > 0 {
			out.fail("bad input left a request index entry %s", promo.RequestIndexKey(rid))
		}
	}
	var rows int
	if err := d.db.DB().GetContext(ctx, &rows, `SELECT COUNT(*) FROM grab_flow WHERE request_id LIKE ?`, d.run+"-hx-%"); err != nil || rows > 0 {
		out.fail("bad input reached the flow log: %d rows (err %v)", rows, err)
	}
	if err := d.db.DB().GetContext(ctx, &rows, `SELECT COUNT(*) FROM promotion WHERE promo_id LIKE ?`, d.run+"-hxp%"); err != nil || rows > 0 {
		out.fail("bad input created %d promotions (err %v)", rows, err)
	}
	if !ready(d.ctl.st.Grab) {
		out.fail("grab-service is not ready after the storm")
	}
}

// probe sends one grab of sale s now, once, and records it like any load request
// (a transport error or an unclear 5xx is retried to a definite answer first).
func (l *load) probe(rd *round, s sale) reply {
	req := &checker.Request{
		RequestID: fmt.Sprintf("%s-%d", l.run, l.seq.Add(1)),
		Pin:       fmt.Sprintf("%s-probe-%d", l.run, rand.IntN(1000000)),
		IP:        fmt.Sprintf("10.97.%d.%d", rand.IntN(250), 1+rand.IntN(250)),
		Items:     []checker.Item{{PromoID: s.PromoID, Type: s.Type, Num: 1}},
		Grab:      checker.Unknown,
		Sent:      time.Now(),
	}
	l.mu.Lock()
	l.reqs = append(l.reqs, req)
	l.mu.Unlock()
	body := grabBody(req)
	r := l.send("/v1/grab", body, 1)
	final := r
	if !grabDefinite(r) && !nothingTaken(r) {
		final, _ = l.callFrom("/v1/grab", body, grabDefinite, 2)
	}
	l.mu.Lock()
	req.Grab, req.Done = final.result, time.Now()
	keepAmounts(req, final)
	l.mu.Unlock()
	return r
}

// legit makes one ordinary grab of one unit of s for pin (and cancels it when
// cancel is set), recorded like any load request.
// track adds a request a drill sends by itself to those the checker accounts for;
// update changes it under the load's lock.
func (l *load) track(req *checker.Request) {
	l.mu.Lock()
	l.reqs = append(l.reqs, req)
	l.mu.Unlock()
}

func (l *load) update(req *checker.Request, change func(*checker.Request)) {
	l.mu.Lock()
	change(req)
	l.mu.Unlock()
}

func (l *load) legit(s sale, pin, ip string, cancel bool) *checker.Request {
	req := &checker.Request{
		RequestID: fmt.Sprintf("%s-%d", l.run, l.seq.Add(1)),
		Pin:       pin, IP: ip,
		Items: []checker.Item{{PromoID: s.PromoID, Type: s.Type, Num: 1}},
		Grab:  checker.Unknown,
		Sent:  time.Now(),
	}
	l.mu.Lock()
	l.reqs = append(l.reqs, req)
	l.mu.Unlock()
	answer, _ := l.call("/v1/grab", grabBody(req), grabDefinite)
	l.mu.Lock()
	req.Grab, req.Done = answer.result, time.Now()
	keepAmounts(req, answer)
	l.mu.Unlock()
	if cancel && answer.result == "GRANTED" {
		b, _ := json.Marshal(map[string]any{"pin": pin})
		l.mu.Lock()
		req.Cancel = checker.Unknown
		l.mu.Unlock()
		cf, _ := l.call("/v1/grab/"+req.RequestID+"/cancel", b, cancelDefinite)
		l.mu.Lock()
		req.Cancel, req.Done = cf.result, time.Now()
		keepAmounts(req, cf)
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := *req
	return &c
}

// hang freezes a stack process with SIGSTOP for d, then lets it go on (SIGCONT): a
// hung dependency, which only timeouts get past.
func (d *drillEnv) hang(ctx context.Context, name string, dur time.Duration, out *outcome) {
	pid, err := d.ctl.kill(name, syscall.SIGSTOP)
	if err != nil {
		out.fail("freeze %s: %v", name, err)
		return
	}
	out.faults++
	d.logf("%s (pid %d) frozen for %s", name, pid, dur)
	defer func() {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			out.fail("thaw %s (pid %d): %v", name, pid, err)
		}
		d.logf("%s (pid %d) thawed", name, pid)
	}()
	sleep(ctx, dur)
}

// wrongAnswers finds definite answers that are false whatever the fault: every
// drill promotion exists, so NOT_FOUND for a grab is wrong (the shard may be lost,
// not the promotion: that is UNAVAILABLE, retry); and a cancel of a grab the client
// was told GRANTED must find it.
func wrongAnswers(reqs []checker.Request, since time.Time) []string {
	var out []string
	for _, r := range reqs {
		if r.Sent.Before(since) {
			continue
		}
		switch {
		case r.Grab == "NOT_FOUND":
			out = append(out, fmt.Sprintf("%s: grab answered NOT_FOUND for a live promotion", r.RequestID))
		case r.Grab == "GRANTED" && r.Cancel == "NOT_FOUND":
			out = append(out, fmt.Sprintf("%s: cancel of a granted grab answered NOT_FOUND", r.RequestID))
		}
	}
	return out
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// watchCatchUp measures, from up (the broker back), how long the flow sink takes to
// be within a few events of the broker again; wait for the result with sinkCaughtUp.
func (d *drillEnv) watchCatchUp(ctx context.Context, up time.Time) <-chan time.Duration {
	ch := make(chan time.Duration, 1)
	go func() {
		deadline := up.Add(30 * time.Second)
		for ctx.Err() == nil && time.Now().Before(deadline) {
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			lag, err := checker.SinkLag(lctx, d.ctl.st.Kafka)
			cancel()
			if err == nil && lag <= 20 {
				ch <- time.Since(up)
				return
			}
			sleep(ctx, 100*time.Millisecond)
		}
		ch <- -1
	}()
	return ch
}

// sinkCaughtUp waits for watchCatchUp's answer and notes it.
func sinkCaughtUp(caught <-chan time.Duration, out *outcome) {
	took := <-caught
	if took < 0 {
		out.fail("the flow sink did not catch up with the restarted broker within 30 s")
		return
	}
	out.note("the flow sink caught up with the restarted broker %s after it came back", took.Round(100*time.Millisecond))
}
