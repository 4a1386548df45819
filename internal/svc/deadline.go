package svc

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// handlerDeadline bounds the context of every request: past the server's
// WriteTimeout the answer can no longer be written, so work still waiting then (on
// a hung MySQL, say, which answers nothing and refuses nothing) only holds a
// goroutine and a connection of the pool. Every call made with the request's
// context (database/sql, go-redis, kafka-go all honour it) ends by this deadline.
const handlerDeadline = 10 * time.Second

// withDeadline gives each request's context a deadline d from its start.
func withDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := &deadlineCtx{Context: r.Context(), deadline: time.Now().Add(d)}
		defer ctx.release()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// deadlineCtx is a deadline whose timer is armed only when something waits on
// it: Done, Err, or a context derived from it (which asks for Done first). The
// answers that touch nothing but grab-service's memory (sold out from its cache,
// refused by admission) never wait on their context, and a timer plus a child
// registered on the connection's context per request was 5% of its CPU on them;
// a Redis call waits on it, so a grab that reaches a shard arms it. Deadline
// answers at once, so code that only reads the deadline arms nothing either.
//
// A context armed as or after the handler returns (a goroutine it left) is not
// stopped by release but ends with the request's own, which net/http cancels
// when the handler returns; its timer goes with it.
type deadlineCtx struct {
	context.Context // the request's own: its values, and its cancellation once armed
	deadline        time.Time
	once            sync.Once
	armed           atomic.Pointer[armedCtx]
}

type armedCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func (c *deadlineCtx) arm() context.Context {
	c.once.Do(func() {
		ctx, cancel := context.WithDeadline(c.Context, c.deadline)
		c.armed.Store(&armedCtx{ctx, cancel})
	})
	return c.armed.Load().ctx
}

// release stops the timer, if one was armed, when the handler returns.
func (c *deadlineCtx) release() {
	if a := c.armed.Load(); a != nil {
		a.cancel()
	}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *deadlineCtx) Done() <-chan struct{} { return c.arm().Done() }

func (c *deadlineCtx) Err() error { return c.arm().Err() }

// Value asks the armed context once there is one: a context derived from this one
// then finds the armed deadline's cancelCtx under the context package's own key and
// registers with it directly (no goroutine per child), and context.Cause names the
// deadline.
func (c *deadlineCtx) Value(key any) any {
	if a := c.armed.Load(); a != nil {
		return a.ctx.Value(key)
	}
	return c.Context.Value(key)
}
