package client

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy bounds a call's retries. The caller's context bounds them too: its
// deadline is the call's total deadline, and a wait that would end after it is
// not begun (the call returns its last answer instead).
type RetryPolicy struct {
	// MaxAttempts is the most sends of one call; 0 means DefaultMaxAttempts, 1
	// sends once and never retries.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the wait between sends: it doubles from
	// MinBackoff up to MaxBackoff, each wait drawn between half and all of it
	// ("equal jitter", so that many clients' retries do not arrive in step).
	// 0 means 25 ms and 1 s. An answer's Retry-After, when longer, is waited
	// instead.
	MinBackoff, MaxBackoff time.Duration
	// NoRateLimitRetry returns a 429 RATE_LIMITED at once (nothing was taken)
	// instead of retrying it after its Retry-After: for a caller that would rather
	// tell the buyer, or a load generator whose rate-limited promotions must say so.
	NoRateLimitRetry bool
}

// DefaultMaxAttempts is the sends a call makes at most unless its RetryPolicy
// says otherwise.
const DefaultMaxAttempts = 10

// maxGrabAttempt is the largest X-Grab-Attempt grab-service accepts.
const maxGrabAttempt = 1_000_000

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.MinBackoff <= 0 {
		p.MinBackoff = 25 * time.Millisecond
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = time.Second
	}
	p.MaxBackoff = max(p.MaxBackoff, p.MinBackoff)
	return p
}

// backoff is the wait after the n-th send (n >= 1).
func (p RetryPolicy) backoff(n int) time.Duration {
	d := p.MinBackoff
	for i := 1; i < n && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// wait is the wait before the send after the n-th, whose answer said retryAfter;
// ok is false when the call must not send again: its attempts are spent or the
// wait would end after the context's deadline.
func (p RetryPolicy) wait(ctx context.Context, n int, retryAfter time.Duration) (time.Duration, bool) {
	if n >= p.MaxAttempts || ctx.Err() != nil {
		return 0, false
	}
	d := max(p.backoff(n), retryAfter)
	if dl, ok := ctx.Deadline(); ok && time.Now().Add(d).After(dl) {
		return 0, false
	}
	return d, true
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryAfter reads a Retry-After header: seconds (the spec's form), or an HTTP
// date; 0 when absent or unreadable.
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, 3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
