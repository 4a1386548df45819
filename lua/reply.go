package lua

import (
	"cmp"
	"fmt"

	"github.com/flashsale/platform/internal/promo"
)

// itemKeys expands promotion hash keys into the per-item KEYS of a script
// (promo.KeysPerItem each).
func itemKeys(keys []string) ([]string, error) {
	return expandKeys(keys, 0)
}

// itemKeysAndOutbox is itemKeys followed by the shard's state outbox (empty:
// promo.StateOutboxKey), the KEYS of the item scripts that may change a sale's state
// (q.lua, return.lua).
func itemKeysAndOutbox(keys []string, outbox string) ([]string, error) {
	out, err := expandKeys(keys, 1)
	if err != nil {
		return nil, err
	}
	return append(out, cmp.Or(outbox, promo.StateOutboxKey)), nil
}

func expandKeys(keys []string, extra int) ([]string, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("no promotion keys")
	}
	out := make([]string, 0, promo.KeysPerItem*len(keys)+extra)
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
