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

// settle waits until the stack's own processes are nearly idle, so one scenario's
// after-work (the flow sink storing its events, the reconciler) does not eat into
// the next one's figures; it waits at most longest. Processes it cannot read are left out.
func (b *bench) settle(longest time.Duration) {
	start := time.Now()
	last := stackTicks(b.st.Pids)
	for time.Since(start) < longest {
		time.Sleep(quietWindow)
		now := stackTicks(b.st.Pids)
		if now-last < quietTicks {
			break
		}
		last = now
	}
	if waited := time.Since(start); waited > 3*quietWindow {
		fmt.Fprintf(os.Stderr, "   waited %s for the stack to go quiet\n", waited.Round(100*time.Millisecond))
	}
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
