package verify_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
	"github.com/flashsale/platform/recovery/internal/verify"
)

// Every bucket's channels field is held to promotion.channels (q.lua decides
// CHANNEL_NOT_ALLOWED from it), against the local stack's redis-servers and a
// throwaway MariaDB database, with the drift planted by hand on this test's own
// promotions: a bucket that lost a channel, a promotion that lost its field, a
// promotion of every channel given one, a field that is no bitmask. 0 reads as
// every channel, as absent; a patch written to Redis and not promoted is no drift.
func TestVerifyReportsChannelDrift(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := rt.OpenStore(t)
	shards := rt.Shards(t, nil)
	suffix := testenv.Suffix()
	appWeb := promo.Channels(promo.ChannelAPP | promo.ChannelWeb)
	plain := rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: "vch-" + suffix, Total: 10, Channels: appWeb})
	hot := rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: "vch-k-" + suffix, Total: 12, Buckets: 3, Channels: appWeb})
	every := rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: "vch-all-" + suffix, Total: 10})
	l := bucket.LayoutOf(ring.Default, hot, 3)
	hset := func(key string, shard int, v any) {
		if err := shards[shard].HSet(ctx, key, "channels", v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	d := verify.Deps{Shards: shards, Record: db.Rebuild, Log: rt.Logger(t)}
	o := verify.Defaults()
	o.Rechecks = 0
	channelDrifts := func() map[string]verify.Drift {
		t.Helper()
		rep, err := verify.Run(ctx, d, o)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]verify.Drift{}
		for _, dr := range rep.Drifts() {
			if dr.What != "channels" {
				t.Fatalf("a drift other than the channels: %s", dr)
			}
			out[dr.Key] = dr
		}
		return out
	}
	if ds := channelDrifts(); len(ds) != 0 {
		t.Fatalf("as created: %v", ds)
	}

	hset(l.Keys[2], l.Shards[2], int64(promo.ChannelAPP))
	shards[ring.Default.Shard(plain)].HDel(ctx, plain, "channels")
	hset(every, ring.Default.Shard(every), "0")
	ds := channelDrifts()
	want := map[string]string{
		l.Keys[2]: "DRIFT  " + l.Keys[2] + "  shard " + strconv.Itoa(l.Shards[2]) + "  channels  redis=APP  record=APP,WEB",
		plain:     "DRIFT  " + plain + "  shard " + strconv.Itoa(ring.Default.Shard(plain)) + "  channels  redis=every channel  record=APP,WEB",
	}
	if len(ds) != len(want) {
		t.Fatalf("drifts %v; want %d, on %s and %s", ds, len(want), l.Keys[2], plain)
	}
	for key, line := range want {
		if have := ds[key].String(); !strings.HasPrefix(have, line) {
			t.Errorf("%s: %q, want it to open %q", key, have, line)
		}
	}
	if dr := ds[l.Keys[2]]; dr.Redis != int64(promo.ChannelAPP) || dr.Record != int64(appWeb) || dr.Shard != l.Shards[2] {
		t.Errorf("bucket 2's drift: %+v", dr)
	}

	hset(every, ring.Default.Shard(every), int64(promo.ChannelQQ))
	hset(l.Keys[1], l.Shards[1], "APP")
	ds = channelDrifts()
	if dr := ds[every]; dr.Redis != int64(promo.ChannelQQ) || dr.Record != 0 || !strings.Contains(dr.String(), "redis=QQ  record=every channel") {
		t.Errorf("every channel, given QQ: %+v", dr)
	}
	if dr := ds[l.Keys[1]]; dr.Redis != -1 || !strings.Contains(dr.String(), `redis="APP" (no channel bitmask)`) {
		t.Errorf("a field that is no bitmask: %+v", dr)
	}

	// A patch of plain to WECHAT proposed (the row's pending change) and written
	// to Redis: either side of its promote is the record's.
	id := store.ID{PromoID: "vch-" + suffix, Type: 1}
	p, err := db.Promotions.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	next := p.Spec
	next.Channels = promo.Channels(promo.ChannelWeChat)
	if _, err := db.Promotions.Update(ctx, id, func(p *store.Promotion) error {
		return p.Propose(store.OpPatch, next, promo.Active, time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	for _, cs := range []promo.Channels{next.Channels, appWeb} {
		hset(plain, ring.Default.Shard(plain), int64(cs))
		if dr, ok := channelDrifts()[plain]; ok {
			t.Errorf("%v on the hash, the patch to WECHAT pending: %s", cs.Names(), dr)
		}
	}
	hset(plain, ring.Default.Shard(plain), int64(promo.ChannelQQ))
	if _, ok := channelDrifts()[plain]; !ok {
		t.Error("QQ on the hash, APP,WEB committed and WECHAT pending: no drift reported")
	}
}
