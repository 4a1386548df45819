package svc

import (
	"context"
	"time"
)

// Every runs fn at once and then every interval until ctx ends, and returns nil, so
// a run group's Loop can take it. fn logs its own failures: the next round is the
// retry.
func Every(ctx context.Context, every time.Duration, fn func(context.Context)) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
