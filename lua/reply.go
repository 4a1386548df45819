package lua

import (
	"cmp"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// replyInts reads a script's table reply whose elements are all integers.
func replyInts(cmd *redis.Cmd, script string, min int) ([]int64, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", script, err)
	}
	if len(vals) < min {
		return nil, fmt.Errorf("%s: short reply %v", script, vals)
	}
	out := make([]int64, len(vals))
	for i, v := range vals {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("%s: reply element %d is %T, want integer", script, i, v)
		}
		out[i] = n
	}
	return out, nil
}

// itemKeys expands promotion hash keys into the 5-keys-per-item KEYS of a script.
func itemKeys(keys []string) ([]string, error) {
	return expandKeys(keys, 0)
}

// itemKeysAndOutbox is itemKeys followed by the shard's state outbox (empty:
// StateOutboxKey), the KEYS of the item scripts that may change a sale's state
// (q.lua, return.lua).
func itemKeysAndOutbox(keys []string, outbox string) ([]string, error) {
	out, err := expandKeys(keys, 1)
	if err != nil {
		return nil, err
	}
	return append(out, cmp.Or(outbox, StateOutboxKey)), nil
}

func expandKeys(keys []string, extra int) ([]string, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("no promotion keys")
	}
	out := make([]string, 0, 5*len(keys)+extra)
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if k == "" {
			return nil, fmt.Errorf("empty promotion key")
		}
		if seen[k] {
			return nil, fmt.Errorf("promotion key %s listed twice", k)
		}
		seen[k] = true
		ks := promo.Keys(k)
		out = append(out, ks[:]...)
	}
	return out, nil
}
