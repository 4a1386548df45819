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
