package main

import (
	"context"
	"syscall"
	"time"

	"github.com/flashsale/platform/tools/checker"
)

// kafkaDrill hangs the Kafka broker, then kills it while the flow sink is behind,
// and (unless short) kills it again with kafkaDegrade on.
func kafkaDrill(ctx context.Context, d *drillEnv, rd *round, out *outcome) {
	k := kafkaRun{ctx: ctx, d: d, rd: rd, out: out}
	// First a hung broker (SIGSTOP): connections open, nothing answered. Every
	// write must time out and roll back, and what the broker does with the requests
	// it finds in its sockets when it resumes must not break the record.
	if d.o.hang > 0 {
		d.hang(ctx, "kafka", d.o.hang, out)
		sleep(ctx, d.o.hold)
	}
	pid := k.killBehindSink()
	if pid == 0 {
		return
	}
	caught := k.restart(pid)
	if !d.o.degradePhase {
		sinkCaughtUp(caught, out)
		return
	}
	sleep(ctx, d.o.hold)
	sinkCaughtUp(caught, out)
	k.degraded()
}

// kafkaRun is one run of the Kafka drill.
type kafkaRun struct {
	ctx context.Context
	d   *drillEnv
	rd  *round
	out *outcome
}

// atRisk notes how many events the flow sink has not committed at a kill.
func (k kafkaRun) atRisk() {
	lctx, cancel := context.WithTimeout(k.ctx, 2*time.Second)
	defer cancel()
	if lag, err := checker.SinkLag(lctx, k.d.ctl.st.Kafka); err == nil {
		k.out.note("at the kill the flow sink had not committed %d events (the restarted broker must hand every one of them over)", lag)
	}
}

// killBehindSink kills the broker while the flow sink is behind: frozen for a while
// first, so the grants acknowledged meanwhile live in the broker alone. It returns
// the broker's pid, 0 when it was not killed.
func (k kafkaRun) killBehindSink() int {
	d, out := k.d, k.out
	sinkPid, err := d.ctl.kill("flow-sink", syscall.SIGSTOP)
	if err != nil {
		out.fail("freeze the flow sink: %v", err)
		return 0
	}
	out.faults++
	d.logf("kafka: flow sink (pid %d) frozen for %s before the broker's kill", sinkPid, d.o.hold)
	sleep(k.ctx, d.o.hold)
	var pid int
	if k.ctx.Err() == nil {
		k.atRisk()
		pid, err = d.ctl.kill("kafka", syscall.SIGKILL)
	}
	if terr := syscall.Kill(sinkPid, syscall.SIGCONT); terr != nil { // on every path: a frozen sink stalls later drills
		out.fail("thaw the flow sink (pid %d): %v", sinkPid, terr)
	}
	if err != nil {
		out.fail("kill the broker: %v", err)
	}
	return pid
}

// restart waits for the killed broker (pid) to be gone, brings it back after the
// outage, and checks selling resumes; the restarted broker must hand every event to
// the sink (the checker excuses nothing), whose catch-up it starts watching.
func (k kafkaRun) restart(pid int) <-chan time.Duration {
	d, out, addr := k.d, k.out, k.d.ctl.st.Kafka[0]
	down := time.Now()
	if !waitGone(pid, 10*time.Second) || !waitClosed(addr, 5*time.Second) {
		out.fail("the broker (pid %d) still answers on %s after SIGKILL", pid, addr)
	}
	out.faults++
	d.logf("kafka: broker pid %d killed; down for %s", pid, d.o.kafkaDown)
	sleep(k.ctx, d.o.kafkaDown)
	if err := d.ctl.up(k.ctx); err != nil {
		out.fail("restart the broker: %v", err)
	}
	up := time.Now()
	caught := d.watchCatchUp(k.ctx, up)
	d.logf("kafka: broker back (pid %d) after %s", d.ctl.st.Pids["kafka"], up.Sub(down).Round(time.Millisecond))
	// The load itself shows whether selling resumed: it must, within a few seconds.
	if !d.waitGranted(k.ctx, k.rd, 15*time.Second) {
		out.fail("no grab granted within 15 s of the broker's return")
	}
	return caught
}

// degraded is what on-call does about a long outage: degrade to MySQL while Kafka
// is down, and back once it returns. Selling must go on throughout.
func (k kafkaRun) degraded() {
	d, out, path := k.d, k.out, k.d.ctl.st.SwitchesFile
	orig, sw, ok := readSwitches(path, out)
	if !ok {
		return
	}
	k.atRisk()
	pid, err := d.ctl.kill("kafka", syscall.SIGKILL)
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
	if !d.waitGranted(k.ctx, k.rd, 5*time.Second) {
		out.fail("degraded to MySQL with Kafka down, no grab granted within 5 s")
	}
	sleep(k.ctx, d.o.kafkaDown)
	if err := d.ctl.up(k.ctx); err != nil {
		out.fail("restart the broker: %v", err)
	}
	sleep(k.ctx, d.o.hold/2)
	if err := writeSwitches(path, orig); err != nil {
		out.fail("switch kafkaDegrade off: %v", err)
	}
	d.logf("kafka: broker back (pid %d), kafkaDegrade off", d.ctl.st.Pids["kafka"])
	if !d.waitGranted(k.ctx, k.rd, 15*time.Second) {
		out.fail("no grab granted within 15 s of the switch back to Kafka")
	}
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
