package rebuild

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
)

// openRecord opens a throwaway record (testenv.MySQLDSN), closed when the test ends.
func openRecord(t testing.TB) *store.Store {
	t.Helper()
	db, err := store.Open(context.Background(), testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// ownRedis is a client of a redis-server of the test's own, without persistence;
// both go when the test ends.
func ownRedis(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t, testenv.Volatile).Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// promoted writes spec's row (parts: an envelope pool's split, nil for none) and
// promotes its create, as promo-admin leaves a promotion it created.
func promoted(t testing.TB, db *store.Store, spec promo.Spec, parts []int64, now time.Time) store.Promotion {
	t.Helper()
	ctx := context.Background()
	if err := db.Promotions.InsertPool(ctx, store.NewPromotion(spec, promo.Active, now), parts); err != nil {
		t.Fatal(err)
	}
	p, err := db.Promotions.Promote(ctx, store.ID{PromoID: spec.PromoID, Type: spec.Type}, 1, now)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
