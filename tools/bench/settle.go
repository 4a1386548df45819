package main

import (
	"fmt"
	"os"
	"time"
)

// Quiet is the stack using under a tenth of a core.
const (
	quietWindow = 500 * time.Millisecond
	quietTicks  = 5 // clock ticks (1/100 s) of CPU per window, all stack processes together
)

// settle waits until the stack's own processes and MariaDB are nearly idle, so one
// scenario's after-work (the flow sink storing its events, the reconciler, InnoDB
// flushing and purging what they wrote) does not eat into the next one's figures;
// it waits at most longest. Processes it cannot read are left out.
func (b *bench) settle(longest time.Duration) {
	pids := withDatabase(b.st.Pids)
	start := time.Now()
	last := stackTicks(pids)
	for time.Since(start) < longest {
		time.Sleep(quietWindow)
		now := stackTicks(pids)
		if now-last < quietTicks {
			break
		}
		last = now
	}
	if waited := time.Since(start); waited > 3*quietWindow {
		fmt.Fprintf(os.Stderr, "   waited %s for the stack to go quiet\n", waited.Round(100*time.Millisecond))
	}
}

// withDatabase is the stack's pids and MariaDB's: the stack file does not name the
// database server (the machine's own), so it is found by its command name.
func withDatabase(stack map[string]int) map[string]int {
	out := make(map[string]int, len(stack)+1)
	for name, pid := range stack {
		out[name] = pid
	}
	for pid, p := range sampleCPU() {
		if p.role == roleMySQL {
			out[fmt.Sprintf("mariadb-%d", pid)] = pid
		}
	}
	return out
}

// stackTicks is the CPU time (user + system, clock ticks) the stack's processes have used.
func stackTicks(pids map[string]int) int64 {
	var sum int64
	for _, pid := range pids {
		if pid <= 0 {
			continue
		}
		if _, t, ok := procTicks(pid); ok {
			sum += t
		}
	}
	return sum
}
