package rebuild

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// pipe queues commands and sends them in pipelines of at most max commands: a
// shard of a million ledger entries is written in a few thousand round trips. One
// pipeline is in flight while the next fills, so reading the record and writing
// Redis overlap; pipelines go out one after another, in order, so a later write of
// a field still wins.
type pipe struct {
	ctx  context.Context
	c    redis.UniversalClient
	p    redis.Pipeliner
	n    int
	max  int
	busy bool       // a pipeline is in flight
	done chan error // its outcome
}

func newPipe(ctx context.Context, c redis.UniversalClient, max int) *pipe {
	return &pipe{ctx: ctx, c: c, p: c.Pipeline(), max: max, done: make(chan error, 1)}
}

func (w *pipe) do(args ...any) error {
	w.p.Do(w.ctx, args...)
	w.n++
	if w.n >= w.max {
		return w.send()
	}
	return nil
}

// send waits for the pipeline in flight, then sends the queued commands in the
// background.
func (w *pipe) send() error {
	if err := w.wait(); err != nil {
		return err
	}
	if w.n == 0 {
		return nil
	}
	p := w.p
	w.p, w.n, w.busy = w.c.Pipeline(), 0, true
	go func() { w.done <- execPipe(w.ctx, p) }()
	return nil
}

// wait returns the outcome of the pipeline in flight, if any.
func (w *pipe) wait() error {
	if !w.busy {
		return nil
	}
	w.busy = false
	return <-w.done
}

// flush sends what is queued and waits until Redis has answered all of it.
func (w *pipe) flush() error {
	if err := w.send(); err != nil {
		return err
	}
	return w.wait()
}

func execPipe(ctx context.Context, p redis.Pipeliner) error {
	cmds, err := p.Exec(ctx)
	for _, c := range cmds {
		if c.Err() != nil && !errors.Is(c.Err(), redis.Nil) { // redis.Nil: a SET NX that found its key
			return fmt.Errorf("redis %v: %w", c.Args()[0], c.Err())
		}
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("redis pipeline: %w", err)
	}
	return nil
}

// hset writes a hash in HSET commands of at most hsetPairs field-value pairs.
type hset struct {
	w    *pipe
	key  string
	args []any
}

const hsetPairs = 100

func (h *hset) put(field string, value any) error {
	if h.args == nil {
		h.args = append(make([]any, 0, 2+2*hsetPairs), "HSET", h.key)
	}
	h.args = append(h.args, field, value)
	if len(h.args) >= 2+2*hsetPairs {
		return h.close()
	}
	return nil
}

func (h *hset) close() error {
	if len(h.args) <= 2 {
		return nil
	}
	args := h.args
	h.args = nil
	return h.w.do(args...)
}
