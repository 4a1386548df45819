package recoverytest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
)

// Snapshot is what invariant 5 compares: a promotion's Redis state, rate window aside.
type Snapshot struct {
	Remaining, Total int64
	State            string
	Ver              int64
	RateLimit        int64
	Buckets          string // the field: "" for an ordinary promotion
	Pins, IPs        map[string]string
	Ledger           map[string]lua.LedgerEntry // deadline zeroed: it only matters to open takes
	Pending          int64
	// An envelope pool's: envAmount, envLeft, envDigest, and its sorted set as
	// "score member" in order (empty for a promotion that is no pool).
	EnvAmount, EnvLeft int64
	EnvDigest          string
	Envelopes          []string
}

// Take reads a promotion's Redis state.
func Take(t testing.TB, c redis.UniversalClient, key string) Snapshot {
	t.Helper()
	ctx := context.Background()
	h, _, err := lua.ReadHash(ctx, c, key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	s := Snapshot{Remaining: h.Remaining, Total: h.Total, State: h.State, Ver: h.Ver, RateLimit: h.RateLimit, Ledger: map[string]lua.LedgerEntry{},
		EnvAmount: h.EnvAmount, EnvLeft: h.EnvLeft, EnvDigest: h.EnvDigest}
	for _, z := range c.ZRangeWithScores(ctx, promo.EnvelopeKey(key), 0, -1).Val() {
		s.Envelopes = append(s.Envelopes, fmt.Sprintf("%v %v", z.Score, z.Member))
	}
	s.Buckets = c.HGet(ctx, key, "buckets").Val()
	s.Pins = c.HGetAll(ctx, promo.PinsKey(key)).Val()
	s.IPs = c.HGetAll(ctx, promo.IPsKey(key)).Val()
	s.Pending = c.ZCard(ctx, promo.PendingKey(key)).Val()
	for rid, raw := range c.HGetAll(ctx, promo.LedgerKey(key)).Val() {
		var e lua.LedgerEntry
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			t.Fatalf("ledger %s %s: %v", key, rid, err)
		}
		e.DeadlineMs = 0
		s.Ledger[rid] = e
	}
	return s
}

// RecordAgrees fails the test unless MySQL's flow log sums equal the promotion's
// Redis counters (invariant 4) and nothing was oversold (invariant 1).
func RecordAgrees(t testing.TB, db *store.Rebuild, c redis.UniversalClient, key string) Snapshot {
	t.Helper()
	id, typ, _ := promo.ParseKey(key)
	s := Take(t, c, key)
	fc, err := db.FlowCounters(context.Background(), store.ID{PromoID: id, Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	if s.Remaining < 0 || s.Total-s.Remaining > s.Total {
		t.Errorf("%s oversold: remaining %d of %d", key, s.Remaining, s.Total)
	}
	if have, want := s.Total-s.Remaining, fc.Net(); have != want {
		t.Errorf("%s: Redis granted %d, flow log %d", key, have, want)
	}
	for _, side := range []struct {
		name   string
		redis  map[string]string
		record map[string]int64
	}{{"pin", s.Pins, fc.Pins}, {"ip", s.IPs, fc.IPs}} {
		if len(side.redis) != len(side.record) {
			t.Errorf("%s: %d %s counters in Redis, %d in the flow log", key, len(side.redis), side.name, len(side.record))
		}
		for who, n := range side.record {
			if side.redis[who] != itoa64(n) {
				t.Errorf("%s %s %s: Redis %q, flow log %d", key, side.name, who, side.redis[who], n)
			}
		}
	}
	return s
}
