package promo

import (
	"fmt"
	"testing"

	"github.com/flashsale/platform/internal/ring"
)

func TestRequestIDBesidePutsTheIndexOnThePromotionsShard(t *testing.T) {
	for i := 0; i < 500; i++ {
		key := Key(fmt.Sprintf("p%d", i), 1)
		base := fmt.Sprintf("order-%d", i*7919)
		rid := RequestIDBeside(base, key)
		if ring.Default.Shard(RequestIndexKey(rid)) != ring.Default.Shard(key) {
			t.Fatalf("%s for %s: index on shard %d, promotion on %d", rid, key, ring.Default.Shard(RequestIndexKey(rid)), ring.Default.Shard(key))
		}
		if len(rid) > len(base)+4 {
			t.Errorf("%s: a suffix longer than it needs to be", rid)
		}
		if RequestIDBeside(rid, key) != rid {
			t.Errorf("%s: a derived requestId derived again changes", rid)
		}
	}
}
