package recoverytest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
)

// Spec is a test promotion; zero limits mean unlimited.
type Spec struct {
	PromoID              string
	Total, PerPin, PerIP int64
}

// Create makes the promotion as promo-admin does: the MySQL row with the create
// pending, the hash on its shard, then the create promoted. It returns the key.
func Create(t testing.TB, db *store.Store, shards []redis.UniversalClient, s Spec) string {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	spec := promo.Spec{PromoID: s.PromoID, Type: 1, Title: "recovery test", Total: s.Total,
		PerPinLimit: s.PerPin, PerIPLimit: s.PerIP, MaxPerGrab: 5,
		StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour)}
	if err := db.Insert(ctx, store.NewPromotion(spec, promo.Active, now)); err != nil {
		t.Fatalf("insert %s: %v", s.PromoID, err)
	}
	key := spec.Key()
	code, err := lua.Create(ctx, shards[ring.Default.Shard(key)], ring.Default.Shard(key), key, lua.AdminSpec{Ver: 1, Total: s.Total,
		PerPin: s.PerPin, PerIP: s.PerIP, MaxPerGrab: 5, StartMs: spec.StartAt.UnixMilli(), EndMs: spec.EndAt.UnixMilli(), State: "ACTIVE"})
	if err != nil || code != lua.AdminOK {
		t.Fatalf("create %s: %v %v", key, code, err)
	}
	if _, err := db.Promote(ctx, store.ID{PromoID: s.PromoID, Type: 1}, 1, now); err != nil {
		t.Fatalf("promote %s: %v", key, err)
	}
	return key
}

// IDOnShard returns prefix-<n> for the first n whose promotion key (type 1) lives
// on shard, so a test can place promotions where it needs them.
func IDOnShard(prefix string, shard int) string {
	for n := 0; ; n++ {
		id := prefix + "-" + strconv.Itoa(n)
		if ring.Default.Shard(promo.Key(id, 1)) == shard {
			return id
		}
	}
}
