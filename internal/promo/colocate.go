package promo

import (
	"strconv"

	"github.com/flashsale/platform/internal/ring"
)

// RequestIDBeside returns base, or base with the shortest suffix ".<k>" that makes
// it, whose request index entry the ring puts on the shard of promotion key. A
// grab of promotions on that one shard under such a requestId is claimed by its
// take's own script call, one round trip to another shard fewer (docs/CONTRACT.md,
// "Request index"). A checkout service derives its requestIds so; about 16 hashes.
func RequestIDBeside(base, key string) string {
	want := ring.Default.Shard(key)
	if ring.Default.Shard(RequestIndexKey(base)) == want {
		return base
	}
	for k := 0; ; k++ {
		rid := base + "." + strconv.Itoa(k)
		if ring.Default.Shard(RequestIndexKey(rid)) == want {
			return rid
		}
	}
}
