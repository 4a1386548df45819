package rebuild

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// pipe queues commands and sends them in pipelines of at most max commands: a
// shard of a million ledger entries is written in a few thousand round trips.
type pipe struct {
	ctx  context.Context
	p    redis.Pipeliner
	n    int
	max  int
	sent int
}

func newPipe(ctx context.Context, c redis.UniversalClient, max int) *pipe {
	return &pipe{ctx: ctx, p: c.Pipeline(), max: max}
}

func (w *pipe) do(args ...any) error {
	w.p.Do(w.ctx, args...)
	w.n++
	if w.n >= w.max {
		return w.flush()
	}
	return nil
}

func (w *pipe) flush() error {
	if w.n == 0 {
		return nil
	}
	cmds, err := w.p.Exec(w.ctx)
	w.sent += w.n
	w.n = 0
	if err != nil {
		for _, c := range cmds {
			if c.Err() != nil {
				return fmt.Errorf("redis %v: %w", c.Args()[0], c.Err())
			}
		}
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
