package rebuild

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
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

// grabRows is how seedGrabs writes its rows: when they occurred, their pins'
// prefix (numbered after it) and each row's event id (of its request id and number).
type grabRows struct {
	at    time.Time
	pin   string
	event func(rid string, k int) string
}

// seedGrabs promotes spec (of type 1, as promoted, at created) and writes rows GRAB rows of
// one unit each, as the flow sink would (body hash and index shard included), in
// multi-row INSERTs: a pin every 10 rows and an ip every 16, as scenario 6's
// million rows have 100,000 pins and 62,500 ips. As the flow sink leaves it,
// remaining counts the granted units; the promotion returned says so too.
func seedGrabs(tb testing.TB, db *store.Store, spec promo.Spec, rows int, created time.Time, g grabRows) store.Promotion {
	tb.Helper()
	ctx := context.Background()
	p := promoted(tb, db, spec, nil, created)
	id := spec.PromoID
	shard := ring.Default.Shard(promo.Key(id, 1))
	const perInsert = 2000
	pins, ips := max(rows/10, 1), max(rows/16, 1)
	var q strings.Builder
	for done := 0; done < rows; done += perInsert {
		n := min(perInsert, rows-done)
		q.Reset()
		q.WriteString(`INSERT INTO grab_flow (event_id, kind, request_id, pin, ip, promo_id, promo_type, num, shard, occurred_at, body_hash, index_shard) VALUES `)
		args := make([]any, 0, 9*n)
		for k := done; k < done+n; k++ {
			if k > done {
				q.WriteString(",")
			}
			q.WriteString("(?, 'GRAB', ?, ?, ?, ?, 1, 1, ?, ?, ?, ?)")
			rid := id + "-r" + strconv.Itoa(k)
			args = append(args, g.event(rid, k), rid, g.pin+strconv.Itoa(k%pins),
				"198.18."+strconv.Itoa(k%ips/250%250)+"."+strconv.Itoa(k%ips%250+1), id, shard, g.at, "h"+strconv.Itoa(k),
				ring.Default.Shard(promo.RequestIndexKey(rid)))
		}
		if _, err := db.DB().ExecContext(ctx, q.String(), args...); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := db.DB().ExecContext(ctx, `UPDATE promotion SET remaining = ? WHERE promo_id = ? AND promo_type = 1`,
		spec.Total-int64(rows), id); err != nil {
		tb.Fatal(err)
	}
	p.Remaining = spec.Total - int64(rows)
	return p
}
