package lua

import (
	"context"
	"testing"

	"github.com/flashsale/platform/internal/promo"
)

var (
	appOnly = promo.Channels(promo.ChannelAPP)
	webOnly = promo.Channels(promo.ChannelWeb)
)

func onChannel(c GrabCall, ch promo.Channel) GrabCall {
	c.Channel = ch
	return c
}

func channelSpec(cs promo.Channels) AdminSpec {
	s := baseSpec()
	s.Channels = cs
	return s
}

func TestCreateAndPatchKeepTheChannelsField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, every := promoKey(t, "app"), promoKey(t, "every")
	mustCreate(t, k, channelSpec(appOnly|promo.Channels(promo.ChannelQQ)))
	mustCreate(t, every, baseSpec())
	if h := mustHash(t, k); h.Channels != appOnly|promo.Channels(promo.ChannelQQ) {
		t.Fatalf("channels after create: %v", h.Channels.Names())
	}
	if rdb.HExists(ctx, every, "channels").Val() {
		t.Fatal("a promotion of every channel has a channels field")
	}
	s := channelSpec(webOnly)
	s.Ver = 2
	if r, err := Patch(ctx, rdb, onShard, k, s, now); err != nil || r.Code != AdminOK {
		t.Fatalf("patch: %+v %v", r, err)
	}
	if h := mustHash(t, k); h.Channels != webOnly {
		t.Fatalf("channels after patch: %v", h.Channels.Names())
	}
	s = channelSpec(promo.EveryChannel)
	s.Ver = 3
	if r, err := Patch(ctx, rdb, onShard, k, s, now); err != nil || r.Code != AdminOK {
		t.Fatalf("patch: %+v %v", r, err)
	}
	if rdb.HExists(ctx, k, "channels").Val() {
		t.Fatal("a patch to every channel left the channels field")
	}
	// PatchFrom (the undo across buckets) takes the channels back with the spec.
	s = channelSpec(appOnly)
	s.Ver = 2
	if r, err := PatchFrom(ctx, rdb, onShard, k, s, 3, now); err != nil || r.Code != AdminOK {
		t.Fatalf("patch from: %+v %v", r, err)
	}
	if h := mustHash(t, k); h.Channels != appOnly || h.Ver != 2 {
		t.Fatalf("after the undo: ver %d channels %v", h.Ver, h.Channels.Names())
	}
	bad := channelSpec(promo.Channels(16))
	if _, err := Create(ctx, rdb, onShard, promoKey(t, "bad"), bad); err == nil {
		t.Fatal("create accepted channels beyond the contract's")
	}
}

func TestGrabByChannel(t *testing.T) {
	t.Parallel()
	k, every := promoKey(t, "app"), promoKey(t, "every")
	mustCreate(t, k, channelSpec(appOnly))
	mustCreate(t, every, baseSpec())
	for _, c := range []struct {
		rid  string
		key  string
		ch   promo.Channel
		want Code
	}{
		{"web", k, promo.ChannelWeb, CodeChannelNotAllowed},
		{"none", k, promo.NoChannel, CodeChannelNotAllowed},
		{"wechat", k, promo.ChannelWeChat, CodeChannelNotAllowed},
		{"app", k, promo.ChannelAPP, CodeOK},
		{"every-none", every, promo.NoChannel, CodeOK},
		{"every-web", every, promo.ChannelWeb, CodeOK},
	} {
		r := mustGrab(t, onChannel(grabCall(c.rid, "p-"+c.rid, "10.0.0.1", item(c.key, 1)), c.ch))
		if r.Code != c.want || r.Index != 0 {
			t.Errorf("%s: %+v, want %s", c.rid, r, c.want)
		}
	}
	if h := mustHash(t, k); h.Remaining != 9 {
		t.Errorf("remaining %d, want 9: only the APP grab took", h.Remaining)
	}
	for _, rid := range []string{"web", "none", "wechat"} {
		if _, ok := ledger(t, k, rid); ok {
			t.Errorf("a refused grab %s left a ledger entry", rid)
		}
	}
	// A resend of the APP grab replays, whatever the promotion's channels are now.
	s := channelSpec(webOnly)
	s.Ver = 2
	if r, err := Patch(context.Background(), rdb, onShard, k, s, now); err != nil || r.Code != AdminOK {
		t.Fatalf("patch: %+v %v", r, err)
	}
	r := mustGrab(t, onChannel(grabCall("app", "p-app", "10.0.0.1", item(k, 1)), promo.ChannelAPP))
	if r.Code != CodeDuplicate || r.LedgerState != LedgerPending {
		t.Errorf("resend after the patch: %+v, want DUPLICATE P", r)
	}
	// The patch rules the next grabs.
	if r := mustGrab(t, onChannel(grabCall("app2", "p-app2", "10.0.0.1", item(k, 1)), promo.ChannelAPP)); r.Code != CodeChannelNotAllowed {
		t.Errorf("APP after the patch to WEB: %+v", r)
	}
	if r := mustGrab(t, onChannel(grabCall("web2", "p-web2", "10.0.0.1", item(k, 1)), promo.ChannelWeb)); r.Code != CodeOK {
		t.Errorf("WEB after the patch to WEB: %+v", r)
	}
}

// CHANNEL_NOT_ALLOWED comes after the answers every buyer gets (stopped, not
// started, ended, sold out) and before anything the grab charges.
func TestGrabChannelOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	web := func(rid string, k string) GrabReply {
		return mustGrab(t, onChannel(grabCall(rid, "p1", "10.0.0.1", item(k, 1)), promo.ChannelWeb))
	}
	stopped := promoKey(t, "stopped")
	s := channelSpec(appOnly)
	s.State = "STOPPED"
	mustCreate(t, stopped, s)
	early := promoKey(t, "early")
	s = channelSpec(appOnly)
	s.StartMs = now + 1000
	mustCreate(t, early, s)
	ended := promoKey(t, "ended")
	s = channelSpec(appOnly)
	s.EndMs = now
	mustCreate(t, ended, s)
	sold := promoKey(t, "sold")
	s = channelSpec(appOnly)
	s.Total = 1
	mustCreate(t, sold, s)
	if r := mustGrab(t, onChannel(grabCall("take", "p0", "10.0.0.1", item(sold, 1)), promo.ChannelAPP)); r.Code != CodeOK {
		t.Fatalf("the last unit: %+v", r)
	}
	for k, want := range map[string]Code{stopped: CodeStopped, early: CodeNotStarted, ended: CodeEnded, sold: CodeSoldOut} {
		if r := web("r-"+k, k); r.Code != want {
			t.Errorf("%s on WEB: %s, want %s", k, r.Code, want)
		}
	}
	limited := promoKey(t, "limited")
	s = channelSpec(appOnly)
	s.RateLimit, s.RateWindowMs, s.MaxPerGrab = 1, 60_000, 1
	mustCreate(t, limited, s)
	if r := mustGrab(t, onChannel(grabCall("many", "p1", "10.0.0.1", item(limited, 5)), promo.ChannelWeb)); r.Code != CodeChannelNotAllowed {
		t.Errorf("5 units on WEB (maxPerGrab 1): %s, want CHANNEL_NOT_ALLOWED before TOO_MANY", r.Code)
	}
	if h := mustHash(t, limited); h.WinCount != 0 {
		t.Errorf("a refused channel charged the rate window: %d", h.WinCount)
	}
	if r := mustGrab(t, onChannel(grabCall("app", "p1", "10.0.0.1", item(limited, 1)), promo.ChannelAPP)); r.Code != CodeOK {
		t.Errorf("APP after it: %+v", r)
	}
	_ = ctx
}

// A grab of several items is refused whole when one item's promotion is not sold
// on its channel: the items before it take nothing.
func TestGrabChannelAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := promoKey(t, "a"), promoKey(t, "b")
	mustCreate(t, a, baseSpec())
	mustCreate(t, b, channelSpec(appOnly))
	r := mustGrab(t, onChannel(grabCall("r1", "p1", "10.0.0.1", item(a, 2), item(b, 1)), promo.ChannelWeb))
	if r.Code != CodeChannelNotAllowed || r.Index != 1 {
		t.Fatalf("have %+v, want CHANNEL_NOT_ALLOWED at 1", r)
	}
	for _, k := range []string{a, b} {
		if h := mustHash(t, k); h.Remaining != 10 {
			t.Errorf("%s remaining %d", k, h.Remaining)
		}
		for _, ck := range []string{promo.PinsKey(k), promo.IPsKey(k), promo.LedgerKey(k), promo.PendingKey(k)} {
			if n := rdb.Exists(ctx, ck).Val(); n != 0 {
				t.Errorf("%s exists after a refused grab", ck)
			}
		}
	}
	if r := mustGrab(t, onChannel(grabCall("r2", "p1", "10.0.0.1", item(a, 2), item(b, 1)), promo.ChannelAPP)); r.Code != CodeOK {
		t.Fatalf("on APP: %+v", r)
	}
}

// Every part of a bucketed grab checks its bucket's channels, a part that takes
// no stock too.
func TestGrabChannelOnBucketParts(t *testing.T) {
	t.Parallel()
	b0, b1 := promoKey(t, "b0"), promoKey(t, "b1")
	for _, k := range []string{b0, b1} {
		s := channelSpec(appOnly)
		s.Buckets = 2
		mustCreate(t, k, s)
	}
	for _, part := range []string{"sp", "p", "spn"} {
		r := mustGrab(t, onChannel(grabCall("r-"+part, "p1", "10.0.0.1", GrabItem{Key: b0, Num: 1, Part: part, Buckets: 2}), promo.ChannelQQ))
		if r.Code != CodeChannelNotAllowed {
			t.Errorf("part %s on QQ: %+v", part, r)
		}
	}
	r := mustGrab(t, onChannel(grabCall("r-ok", "p1", "10.0.0.1",
		GrabItem{Key: b0, Num: 1, Part: "p", Buckets: 2}, GrabItem{Key: b1, Num: 1, Part: "si", Buckets: 2}), promo.NoChannel))
	if r.Code != CodeChannelNotAllowed || r.Index != 0 {
		t.Errorf("parts without a channel: %+v", r)
	}
	r = mustGrab(t, onChannel(grabCall("r-app", "p1", "10.0.0.1",
		GrabItem{Key: b0, Num: 1, Part: "p", Buckets: 2}, GrabItem{Key: b1, Num: 1, Part: "si", Buckets: 2}), promo.ChannelAPP))
	if r.Code != CodeOK {
		t.Errorf("parts on APP: %+v", r)
	}
	if h := mustHash(t, b1); h.Remaining != 9 {
		t.Errorf("bucket 1 remaining %d", h.Remaining)
	}
}

func TestGrabRefusesAChannelOutsideTheContract(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	mustCreate(t, k, baseSpec())
	if _, err := Grab(context.Background(), rdb, onChannel(grabCall("r1", "p1", "ip", item(k, 1)), promo.Channel(3))); err == nil {
		t.Error("channel 3 accepted")
	}
	ks := promo.Keys(k)
	keys := append(ks[:], promo.StateOutboxKey)
	if err := qScript.Run(context.Background(), rdb, keys, now, "r1", "h", "p", "ip", now, 1000, "ip", 3, 1).Err(); err == nil {
		t.Error("the script accepted channel 3")
	}
	if h := mustHash(t, k); h.Remaining != 10 {
		t.Errorf("remaining %d after refused calls", h.Remaining)
	}
}
