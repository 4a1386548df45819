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

// Spec is a test promotion; zero limits mean unlimited. Buckets above 1 split it
// (internal/bucket); RateLimit is attempts per minute. Envelope, when set, makes
// it an envelope pool of those parts (amounts in hand-out order; Total is then
// their count).
type Spec struct {
	PromoID              string
	Total, PerPin, PerIP int64
	RateLimit            int64
	Buckets              int
	Envelope             []int64
	// Channels are the channels it is sold on (0: every channel).
	Channels promo.Channels
}

// Create makes the promotion as promo-admin does: the MySQL row with the create
// pending, the hash on its shard (every bucket's hash on its own), then the create
// promoted. It returns the key.
func Create(t testing.TB, db *store.Promotions, shards []redis.UniversalClient, s Spec) string {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	spec := promo.Spec{PromoID: s.PromoID, Type: 1, Title: "recovery test", Total: s.Total,
		PerPinLimit: s.PerPin, PerIPLimit: s.PerIP, MaxPerGrab: 5,
		StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour), Buckets: s.Buckets, Channels: s.Channels}
	admin := lua.AdminSpec{Ver: 1, Total: s.Total, PerPin: s.PerPin, PerIP: s.PerIP, MaxPerGrab: 5,
		StartMs: spec.StartAt.UnixMilli(), EndMs: spec.EndAt.UnixMilli(), State: "ACTIVE", Channels: s.Channels}
	if s.RateLimit > 0 {
		spec.RateLimit = &promo.RateLimit{Limit: s.RateLimit, WindowSeconds: 60}
		admin.RateLimit, admin.RateWindowMs = s.RateLimit, 60_000
	}
	if len(s.Envelope) > 0 {
		env := &promo.Envelope{MinAmount: s.Envelope[0]}
		for _, a := range s.Envelope {
			env.Amount += a
			env.MinAmount = min(env.MinAmount, a)
		}
		spec.Envelope, admin.Envelope = env, s.Envelope
	}
	if err := db.InsertPool(ctx, store.NewPromotion(spec, promo.Active, now), s.Envelope); err != nil {
		t.Fatalf("insert %s: %v", s.PromoID, err)
	}
	key := spec.Key()
	if err := lua.CreateBuckets(ctx, shards, ring.Default, key, promo.BucketsOf(s.Buckets), admin); err != nil {
		t.Fatalf("create %s: %v", key, err)
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
