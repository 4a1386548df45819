package lua

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// HoldsKey names, on each shard, the holds of the grants whose request index
// entries the shard keeps (requestId by deadline); the holds being returned wait
// in HoldsKey + ":expiring" (requestId by the end of the returning instance's lease).
const HoldsKey = "flashsale:holds"

// QueueClaimHold queues claimhold.lua: SET indexKey entry NX GET EX ttlSeconds and,
// when that claimed, ZADD holds deadlineMs requestID. The Cmd answers as SET NX
// GET does: redis.Nil when this call claimed, else the entry already there.
func QueueClaimHold(ctx context.Context, p redis.Pipeliner, indexKey, holds string, entry []byte, ttlSeconds, deadlineMs int64, requestID string) *redis.Cmd {
	if requestID == "" {
		return errCmd(ctx, errors.New("claim hold: empty requestId"))
	}
	return claimHoldScript.EvalSha(ctx, p, []string{indexKey, holds}, entry, ttlSeconds, deadlineMs, requestID)
}

// QueueReclaim queues reclaim.lua: set the request index entry indexKey to entry
// if it still holds seen (its expiry kept); the reply is 1 when it did.
func QueueReclaim(ctx context.Context, p redis.Pipeliner, indexKey, seen string, entry []byte) *redis.Cmd {
	return reclaimScript.EvalSha(ctx, p, []string{indexKey}, seen, entry)
}

// QueueHoldsDue queues holddue.lua (the holds and expiring sets of one shard);
// read the answer with ParseHoldsDue.
func QueueHoldsDue(ctx context.Context, p redis.Pipeliner, holds, expiring string, nowMs, leaseMs int64, limit int) *redis.Cmd {
	if leaseMs < 1 || limit < 1 || limit > 1000 {
		return errCmd(ctx, fmt.Errorf("holds due: lease %d ms and limit %d, want >= 1 and 1..1000", leaseMs, limit))
	}
	return holdDueScript.EvalSha(ctx, p, []string{holds, expiring}, nowMs, leaseMs, limit)
}

// ParseHoldsDue reads holddue.lua's answer: the requestIds leased to the caller.
func ParseHoldsDue(cmd *redis.Cmd) ([]string, error) {
	rids, err := cmd.StringSlice()
	if err != nil {
		return nil, fmt.Errorf("holddue.lua: %w", err)
	}
	return rids, nil
}
