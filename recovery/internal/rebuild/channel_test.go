package rebuild

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

// The rebuild restores the channels field from promotion.channels on every
// bucket, and the rebuilt hash refuses a grab on another channel as the lost one
// did; a promotion of every channel gets no field.
func TestRebuildRestoresTheChannels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, c := openRecord(t), ownRedis(t)
	now := time.Now()
	create := func(id string, k int, cs promo.Channels) store.Promotion {
		return promoted(t, db, promo.Spec{PromoID: id + "-" + testenv.Suffix(), Type: 1, Total: 9, MaxPerGrab: 2,
			StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour), Buckets: k, Channels: cs}, nil, now)
	}
	appWeb := promo.Channels(promo.ChannelAPP | promo.ChannelWeb)
	for _, p := range []store.Promotion{create("ch", 1, appWeb), create("ch-k", 3, appWeb), create("ch-all", 1, promo.EveryChannel)} {
		for _, tg := range targets(p) {
			if _, err := restorePromotion(ctx, c, db.Rebuild, tg, 20, nil); err != nil {
				t.Fatal(err)
			}
			h, found, err := lua.ReadHash(ctx, c, tg.key())
			if err != nil || !found || h.Channels != p.Spec.Channels {
				t.Fatalf("%s rebuilt: channels %v (found %v, %v), want %v", tg.key(), h.Channels.Names(), found, err, p.Spec.Channels.Names())
			}
			if p.Spec.Channels == promo.EveryChannel && c.HExists(ctx, tg.key(), "channels").Val() {
				t.Errorf("%s: a promotion of every channel rebuilt with a channels field", tg.key())
			}
		}
	}
	row := create("ch-grab", 1, appWeb)
	key := row.Spec.Key()
	if _, err := restorePromotion(ctx, c, db.Rebuild, targets(row)[0], 20, nil); err != nil {
		t.Fatal(err)
	}
	for ch, want := range map[promo.Channel]lua.Code{promo.ChannelQQ: lua.CodeChannelNotAllowed, promo.ChannelAPP: lua.CodeOK} {
		r, err := lua.Grab(ctx, c, lua.GrabCall{NowMs: now.UnixMilli(), DeadlineMs: now.UnixMilli() + 5000, RequestID: "r-" + ch.String(),
			BodyHash: "h", Pin: "p", IP: "10.0.0.1", RateFactorPermille: 1000, Channel: ch, Items: []lua.GrabItem{{Key: key, Num: 1}}})
		if err != nil || r.Code != want {
			t.Errorf("grab on %s of the rebuilt hash: %v %v, want %s", ch, r.Code, err, want)
		}
	}
}
