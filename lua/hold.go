package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// QueueClaimHold queues claimhold.lua: SET indexKey entry NX GET EX ttlSeconds and,
// when that claimed, ZADD holds (promo.HoldsKey) deadlineMs requestID. The Cmd answers as SET NX
// GET does: redis.Nil when this call claimed, else the entry already there.
func QueueClaimHold(ctx context.Context, p redis.Pipeliner, indexKey, holds string, entry []byte, ttlSeconds, deadlineMs int64, requestID string) *redis.Cmd {
	if requestID == "" {
		return errCmd(ctx, errors.New("claim hold: empty requestId"))
	}
	return claimHoldScript.EvalSha(ctx, p, []string{indexKey, holds}, entry, ttlSeconds, deadlineMs, requestID)
}

// HoldLift is what lifting a hold for a confirm found (confirmhold.lua).
type HoldLift int

const (
	HoldNone       HoldLift = 0 // no hold: never held, confirmed, or returned
	HoldLifted     HoldLift = 1 // moved to confirming: this confirm publishes its CONFIRM
	HoldConfirming HoldLift = 2 // another confirm has it in confirming
	HoldExpiring   HoldLift = 3 // being returned: the confirm came too late
)

// QueueLiftHold queues confirmhold.lua's lift of requestID's hold (holds is the
// shard's holds set); read it with ParseLiftHold.
func QueueLiftHold(ctx context.Context, p redis.Pipeliner, holds, requestID string) *redis.Cmd {
	return confirmHoldScript.EvalSha(ctx, p, []string{holds, promo.ConfirmingKey(holds), promo.ExpiringKey(holds)}, "lift", requestID)
}

// ParseLiftHold reads a lift: what it found, and the hold's deadline (unix ms)
// when it found one.
func ParseLiftHold(cmd *redis.Cmd) (HoldLift, int64, error) {
	v, err := cmd.Slice()
	if err != nil || len(v) == 0 {
		return 0, 0, fmt.Errorf("confirmhold.lua lift: %v %w", v, err)
	}
	code, ok := v[0].(int64)
	if !ok || code < 0 || code > 3 || (code == 1 || code == 2) != (len(v) == 2) {
		return 0, 0, fmt.Errorf("confirmhold.lua lift: unexpected answer %v", v)
	}
	var deadline int64
	if len(v) == 2 {
		s, _ := v[1].(string)
		if deadline, err = strconv.ParseInt(s, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("confirmhold.lua lift: deadline %v: %w", v[1], err)
		}
	}
	return HoldLift(code), deadline, nil
}

// QueueRestoreHold queues confirmhold.lua's restore: the hold back from confirming
// to holds, unless an acknowledged confirm took it out; the reply is 1 when it went back.
func QueueRestoreHold(ctx context.Context, p redis.Pipeliner, holds, requestID string) *redis.Cmd {
	return confirmHoldScript.EvalSha(ctx, p, []string{holds, promo.ConfirmingKey(holds), promo.ExpiringKey(holds)}, "restore", requestID)
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
