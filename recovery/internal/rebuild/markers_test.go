package rebuild

import (
	"context"
	"slices"
	"testing"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
)

// rebuild --missing takes the shards without a built marker and those whose marker
// names another server (a replica promoted in a failover), not those built here.
func TestUnbuiltTakesLostAndPromotedShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.StartRedis(t, testenv.Volatile).Client()
	shards := testenv.OneServer(c)
	for i := range shards {
		if i != 3 && i != 7 {
			if err := markBuilt(ctx, c, i, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Shard 3 lost its marker; shard 7 holds one its master wrote before a failover.
	c.Set(ctx, promo.BuiltKey(7), `{"by":"bin/recovery rebuild","at":"2026-12-01T00:00:00Z","promotions":2,"runId":"0123456789abcdef"}`, 0)
	have, err := Unbuilt(ctx, shards)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{3, 7}; !slices.Equal(have, want) {
		t.Fatalf("Unbuilt = %v, want %v", have, want)
	}
}
