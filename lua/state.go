package lua

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// The sale states a promo.StateChange announces (docs/CONTRACT.md, "Promotion state events").
const (
	StateSoldOut   = "SOLD_OUT"
	StateRestocked = "RESTOCKED"
	StateStopped   = "STOPPED"
	StateEnded     = "ENDED"
	StateDeleted   = "DELETED"
	// A bucket's own stock, never published: relayed to bucket 0 (RelayBucketState),
	// which announces the sale's SOLD_OUT and RESTOCKED.
	StateBucketEmpty  = "BUCKET_EMPTY"
	StateBucketFilled = "BUCKET_FILLED"
)

// ParseStateChange reads an outbox entry "<seq>|<state>|<key>|<nowMs>".
func ParseStateChange(member string) (promo.StateChange, error) {
	parts := strings.Split(member, "|")
	if len(parts) != 4 {
		return promo.StateChange{}, fmt.Errorf("state change %q: want seq|state|key|nowMs", member)
	}
	seq, err1 := strconv.ParseInt(parts[0], 10, 64)
	at, err2 := strconv.ParseInt(parts[3], 10, 64)
	if err1 != nil || err2 != nil || parts[1] == "" || parts[2] == "" {
		return promo.StateChange{}, fmt.Errorf("state change %q: bad seq, state, key or time", member)
	}
	return promo.StateChange{Key: parts[2], State: parts[1], Seq: seq, AtMs: at, Member: member}, nil
}

// replyParts reads a script's table reply: integers first (at least min of
// them), then the state changes the call made, as strings.
func replyParts(cmd *redis.Cmd, script string, min int) ([]int64, []promo.StateChange, error) {
	ints, changes, envs, err := replyWithEnvelopes(cmd, script, min)
	if err == nil && envs != nil {
		return nil, nil, fmt.Errorf("%s: a reply with envelopes where none are expected", script)
	}
	return ints, changes, err
}

// replyWithEnvelopes is replyParts of a reply that may end with the envelopes of
// an envelope pool's items (q.lua's and return.lua's; nil when it does not).
func replyWithEnvelopes(cmd *redis.Cmd, script string, min int) ([]int64, []promo.StateChange, []Envelope, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", script, err)
	}
	var envs []Envelope
	if len(vals) > 0 {
		if last, ok := vals[len(vals)-1].([]interface{}); ok {
			if envs, err = parseEnvelopes(last, script); err != nil {
				return nil, nil, nil, err
			}
			vals = vals[:len(vals)-1]
		}
	}
	var ints []int64
	var changes []promo.StateChange
	for i, v := range vals {
		switch v := v.(type) {
		case int64:
			if changes != nil {
				return nil, nil, nil, fmt.Errorf("%s: integer %d after the state changes: %v", script, i, vals)
			}
			ints = append(ints, v)
		case string:
			c, err := ParseStateChange(v)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", script, err)
			}
			changes = append(changes, c)
		default:
			return nil, nil, nil, fmt.Errorf("%s: reply element %d is %T, want integer or state change", script, i, v)
		}
	}
	if len(ints) < min {
		return nil, nil, nil, fmt.Errorf("%s: short reply %v", script, vals)
	}
	return ints, changes, envs, nil
}

// Ended runs ended.lua: ENDED for the promotion key once its sale is over, if
// not announced yet. It returns the change made, if any, and settled: false only
// while the sale has not reached its end (ask again later).
func Ended(ctx context.Context, c redis.Scripter, key, outbox string, nowMs int64) (changes []promo.StateChange, settled bool, err error) {
	r, changes, err := replyParts(endedScript.Run(ctx, c, []string{key, outbox}, nowMs), "ended.lua", 1)
	if err != nil {
		return nil, false, err
	}
	return changes, r[0] != 2, nil
}

// StateDue runs statedue.lua: up to limit outbox changes older than graceMs,
// leased to the caller for graceMs.
func StateDue(ctx context.Context, c redis.Scripter, outbox string, nowMs, graceMs int64, limit int) ([]promo.StateChange, error) {
	if graceMs < 1 || limit < 1 || limit > 1000 {
		return nil, fmt.Errorf("state due: grace %d ms and limit %d, want >= 1 and 1..1000", graceMs, limit)
	}
	_, changes, err := replyParts(stateDueScript.Run(ctx, c, []string{outbox}, nowMs, graceMs, limit), "statedue.lua", 0)
	return changes, err
}

// RelayBucketState runs bucketstate.lua on c, the server of bucket 0 of the
// bucket change's promotion: bucket 0 applies the change (in seq order per
// bucket; a repeat or a stale one changes nothing) and answers the sale's
// SOLD_OUT or RESTOCKED when it made one, to publish from outbox.
func RelayBucketState(ctx context.Context, c redis.Scripter, outbox string, change promo.StateChange, nowMs int64) ([]promo.StateChange, error) {
	if change.State != StateBucketEmpty && change.State != StateBucketFilled {
		return nil, fmt.Errorf("relay bucket state: %s is no bucket's change", change.Member)
	}
	empty := 0
	if change.State == StateBucketEmpty {
		empty = 1
	}
	key := promo.BucketBase(change.Key)
	_, changes, err := replyParts(bucketStateScript.Run(ctx, c, []string{key, outbox}, nowMs, change.Key, change.Seq, empty), "bucketstate.lua", 1)
	return changes, err
}

// BucketRelay relays a bucket's change to bucket 0 on the server serverOf names
// for the promotion key, at the time now gives (promostate.RelayFunc).
func BucketRelay(serverOf func(key string) redis.UniversalClient, outbox string, now func() time.Time) func(context.Context, promo.StateChange) (redis.Cmdable, []promo.StateChange, error) {
	return func(ctx context.Context, ch promo.StateChange) (redis.Cmdable, []promo.StateChange, error) {
		c := serverOf(promo.BucketBase(ch.Key))
		changes, err := RelayBucketState(ctx, c, outbox, ch, now().UnixMilli())
		return c, changes, err
	}
}
