package main

import (
	"context"
	"os/exec"
	"time"
)

// mysqlDrill stops MariaDB while the flow sink runs: the grab path must sell on.
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
