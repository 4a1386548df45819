package flowsink

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Backoff bounds the wait between attempts of a step that must not be skipped.
type Backoff struct {
	Min, Max time.Duration
}

// delay is the wait before attempt n+1: doubling from Min, capped at Max, with
// "equal jitter" (half fixed, half random) so sinks restarted together do not
// hammer a recovering MySQL in step.
func (b Backoff) delay(n int) time.Duration {
	d := b.Min
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	half := d / 2
	return half + rand.N(half+1)
}

// retry runs fn until it succeeds or ctx ends. It never gives up on its own: the
// sink may not skip a batch or acknowledge what it has not stored, so waiting out
// an outage is the only correct move. Each failure is logged with its attempt number.
func retry(ctx context.Context, b Backoff, log *slog.Logger, what string, onFail func(), fn func(context.Context) error) error {
	for n := 0; ; n++ {
		err := fn(ctx)
		if err == nil {
			if n > 0 {
				log.Info(what+" succeeded after retries", "attempts", n+1)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if onFail != nil {
			onFail()
		}
		wait := b.delay(n)
		log.Warn(what+" failed; retrying", "attempt", n+1, "retryIn", wait.String(), "err", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}
