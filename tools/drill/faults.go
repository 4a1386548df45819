package main

import (
	"context"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
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
		if fenced, err = fencedShards(d.ctl.st.Ops.Grab); err == nil && contains(fenced, shard) {
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

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
