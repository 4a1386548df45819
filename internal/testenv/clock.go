package testenv

import (
	"sync"
	"time"
)

// Clock is a settable clock for a service under test: real time plus an offset,
// or, once frozen, a time that moves only when the test moves it. The zero Clock
// is real time.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
	frozen bool      // the clock stands at at, moved by Advance and Rewind only
	at     time.Time // when frozen
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		return c.at
	}
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	if c.frozen {
		c.at = c.at.Add(d)
	} else {
		c.offset += d
	}
	c.mu.Unlock()
}

// Rewind sets the clock back to at, as though no time had passed since: a test
// whose steps must fall within a grace measured by the service's clock uses it,
// so a slow machine cannot stretch the steps past it.
func (c *Clock) Rewind(at time.Time) {
	c.mu.Lock()
	if c.frozen {
		c.at = at
	} else {
		c.offset = time.Until(at)
	}
	c.mu.Unlock()
}

// Freeze stops the clock at at: from then on it moves only by Advance and Rewind,
// so a test whose steps must be a given time of the service's clock apart (a
// cache's life, a stale keep) has them exactly that far apart, however slowly the
// machine runs between them.
func (c *Clock) Freeze(at time.Time) {
	c.mu.Lock()
	c.frozen, c.at = true, at
	c.mu.Unlock()
}
