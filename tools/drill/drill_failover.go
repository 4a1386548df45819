package main

import (
	"context"
	"syscall"
	"time"
)

// failoverDrill puts two grab-services behind the proxy, kills one, and stops the
// other gracefully.
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
