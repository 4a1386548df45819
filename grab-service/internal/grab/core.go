package grab

import (
	"context"
	"errors"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
)

// core is what every part of the service shares: its dependencies, its
// configuration, the ring and the shards' executors. The parts (the request index,
// the bucket router, the shard guard, the settler) each hold it and add one job.
type core struct {
	Deps
	cfg   Config
	ring  *ring.Ring
	execs []*shardExec
}

// post hands the state changes a script on shard made to the publisher.
func (c *core) post(shard int, changes []promo.StateChange) {
	if c.States != nil && len(changes) > 0 {
		c.States.Post(c.Shards[shard], changes)
	}
}

// settleCtx is for clean-up that must run even when the caller's deadline has passed.
func (c *core) settleCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.cfg.RedisTimeout*2)
}

func (c *core) logErr(msg string, err error, attrs ...any) {
	if err != nil && !errors.Is(err, context.Canceled) {
		c.Logger.Warn(msg, append(attrs, "err", err.Error())...)
	}
}

// holdDeadline is when a grab claimed at now with holdSeconds stops holding.
func (c Config) holdDeadline(now time.Time, holdSeconds int) time.Time {
	return now.Add(c.AnswerTimeout + time.Duration(holdSeconds)*time.Second)
}
