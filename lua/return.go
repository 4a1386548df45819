package lua

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ReturnCall is one return.lua call: give back what RequestID took from the
// promotions Keys (hash keys, promo.Key, all on one shard).
type ReturnCall struct {
	RequestID, Pin string
	// OnlyPending is the rollback/reconciler mode: refuse (COMMITTED) if any entry is
	// committed, so a take whose flow event made it to the log is never undone here.
	OnlyPending bool
	NowMs       int64
	Keys        []string
}

// ReturnReply is return.lua's answer; Returned counts the items this call returned.
type ReturnReply struct {
	Code     ReturnCode
	Returned int
}

func (c ReturnCall) build() ([]string, []interface{}, error) {
	if c.RequestID == "" {
		return nil, nil, errors.New("return: empty requestId")
	}
	keys, err := itemKeys(c.Keys)
	if err != nil {
		return nil, nil, fmt.Errorf("return %s: %w", c.RequestID, err)
	}
	only := "0"
	if c.OnlyPending {
		only = "1"
	}
	return keys, []interface{}{c.RequestID, c.Pin, only, c.NowMs}, nil
}

// QueueReturn queues return.lua on a pipeline (EVALSHA only: Load first, or use RunPipeline).
func QueueReturn(ctx context.Context, p redis.Pipeliner, c ReturnCall) *redis.Cmd {
	keys, args, err := c.build()
	if err != nil {
		return errCmd(ctx, err)
	}
	return returnScript.EvalSha(ctx, p, keys, args...)
}

// Return runs return.lua (EVALSHA, falling back to EVAL on NOSCRIPT).
func Return(ctx context.Context, c redis.Scripter, call ReturnCall) (ReturnReply, error) {
	keys, args, err := call.build()
	if err != nil {
		return ReturnReply{}, err
	}
	return ParseReturn(returnScript.Run(ctx, c, keys, args...))
}

// ParseReturn reads return.lua's reply.
func ParseReturn(cmd *redis.Cmd) (ReturnReply, error) {
	r, err := replyInts(cmd, "return.lua", 1)
	if err != nil {
		return ReturnReply{}, err
	}
	switch c := ReturnCode(r[0]); c {
	case ReturnReturned:
		if len(r) < 2 {
			return ReturnReply{}, fmt.Errorf("return.lua: RETURNED without count")
		}
		return ReturnReply{Code: c, Returned: int(r[1])}, nil
	case ReturnAlreadyReturned, ReturnNotFound, ReturnCommitted:
		return ReturnReply{Code: c}, nil
	}
	return ReturnReply{}, fmt.Errorf("return.lua: unknown code %d", r[0])
}
