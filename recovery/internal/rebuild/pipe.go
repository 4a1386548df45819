package rebuild

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/lua"
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

// hset writes a hash in HSET commands of at most hsetPairs field-value pairs,
// without an allocation per pair: a rebuild writes millions. The values of a
// command are appended as text to one buffer and become one string when the
// command is queued; fields and values go to go-redis as *string into slices the
// command keeps (boxing a string into an argument would allocate).
type hset struct {
	w      *pipe
	key    string
	fields []string
	values []byte // the values of this command back to back
	ends   []int  // where each one ends in values
}

const hsetPairs = 100

// putInt sets field to v (Redis keeps hash values as text either way).
func (h *hset) putInt(field string, v int64) error {
	h.values = strconv.AppendInt(h.values, v, 10)
	return h.added(field)
}

// putEntry sets field to the ledger entry's JSON.
func (h *hset) putEntry(field string, e lua.LedgerEntry) error {
	h.values = e.AppendJSON(h.values)
	return h.added(field)
}

func (h *hset) added(field string) error {
	h.fields = append(h.fields, field)
	h.ends = append(h.ends, len(h.values))
	if len(h.fields) >= hsetPairs {
		return h.close()
	}
	return nil
}

// close queues what is staged as one HSET.
func (h *hset) close() error {
	n := len(h.fields)
	if n == 0 {
		return nil
	}
	// The pipeline holds pointers into fields and values until it is sent: they
	// are this command's own; the next one starts new slices.
	fields, values := h.fields, make([]string, n)
	text := string(h.values)
	start := 0
	args := make([]any, 0, 2+2*n)
	args = append(args, "HSET", h.key)
	for i, end := range h.ends {
		values[i] = text[start:end]
		start = end
		args = append(args, &fields[i], &values[i])
	}
	h.fields, h.values, h.ends = make([]string, 0, hsetPairs), h.values[:0], h.ends[:0]
	return h.w.do(args...)
}
