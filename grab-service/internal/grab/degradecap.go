package grab

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// degradeCap bounds the grabs one instance sends to MySQL while kafkaDegrade is
// on (the switches' degradeMaxPerSecond). Degraded, every grant is a MySQL
// transaction, so MySQL, not Redis, is the ceiling, and a promotion without a
// rate limit would otherwise send as many as buyers press (seed 004: degrade "at a
// reduced rate"). It runs on the service's clock and is rebuilt when on-call
// changes the cap; its burst is a tenth of a second's worth, so a burst of
// buyers reaches MySQL spread out rather than all at once.
type degradeCap struct {
	mu        sync.Mutex
	lim       *rate.Limiter
	perSecond float64
}

// take reports whether a grab may go to MySQL now under a cap of perSecond; when
// not, how long until one may.
func (d *degradeCap) take(perSecond float64, now time.Time) (wait time.Duration, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lim == nil || d.perSecond != perSecond {
		d.lim = rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond/10)))
		d.perSecond = perSecond
	}
	r := d.lim.ReserveN(now, 1)
	if wait = r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return wait, false
	}
	return 0, true
}

// degradeCapped answers a grab refused by the degrade cap: nothing was taken.
func degradeCapped(rid string, perSecond float64, wait time.Duration) Result {
	return Result{RequestID: rid, Result: RateLimited, RetryAfter: wait,
		Message: fmt.Sprintf("degraded to MySQL: this instance's cap of %g grabs a second (degradeMaxPerSecond) is reached; retry", perSecond)}
}
