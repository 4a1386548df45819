package main

import (
	"context"
	"math/rand/v2"
	"syscall"
	"time"
)

// crashDrill SIGKILLs grab-service (now and then the flow sink too) mid-load and
// restarts it, every third time with kafkaDegrade on.
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
