package app_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// grabOn runs q.lua on the promotion's hash as grab-service would, through channel.
func grabOn(t *testing.T, e *admintest.Env, id, rid string, channel promo.Channel) lua.Code {
	t.Helper()
	key := promo.Key(id, 1)
	shard, _ := e.App.Pool.For(key)
	now := e.Clock.Now().UnixMilli()
	r, err := lua.Grab(context.Background(), e.Shard(shard), lua.GrabCall{NowMs: now, DeadlineMs: now + 5000,
		RequestID: rid + "-" + id, BodyHash: "h", Pin: "pin-" + rid, IP: "10.0.0.1", RateFactorPermille: 1000,
		Channel: channel, Items: []lua.GrabItem{{Key: key, Num: 1}}, Outbox: promo.StateOutboxKey + ":" + id})
	if err != nil {
		t.Fatalf("grab %s: %v", rid, err)
	}
	return r.Code
}

// A create's channels are stored in the row and the hash and shown by GET, the
// list and the create's answer; a PATCH changes them ([] = every channel again,
// absent = unchanged) and the grabs follow.
func TestChannelsCreatePatchAndGrabs(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("chan")
	spec := e.Spec(id)
	spec["channels"] = []string{"WEB", "APP"}
	r := e.Do(http.MethodPost, "/v1/promotions", admin, spec)
	if r.Status != http.StatusCreated || !strings.Contains(string(r.Body), `"channels":["APP","WEB"]`) {
		t.Fatalf("create: %s", r)
	}
	e.Agree(id, 1)
	if h, _ := e.Hash(id, 1); h.Channels != promo.Channels(promo.ChannelAPP|promo.ChannelWeb) {
		t.Fatalf("hash channels %v", h.Channels.Names())
	}
	for _, p := range []string{path(id), "/v1/promotions"} {
		if r := e.Do(http.MethodGet, p, viewer, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"channels":["APP","WEB"]`) {
			t.Errorf("GET %s: %s", p, r)
		}
	}
	if c := grabOn(t, e, id, "qq", promo.ChannelQQ); c != lua.CodeChannelNotAllowed {
		t.Errorf("QQ before the patch: %s", c)
	}
	if c := grabOn(t, e, id, "web", promo.ChannelWeb); c != lua.CodeOK {
		t.Errorf("WEB before the patch: %s", c)
	}

	r = e.Do(http.MethodPatch, path(id), admin, map[string]any{"channels": []string{"QQ"}})
	if r.Status != http.StatusOK || r.Promotion().Channels != promo.Channels(promo.ChannelQQ) {
		t.Fatalf("patch to QQ: %s", r)
	}
	e.Agree(id, 1)
	if c := grabOn(t, e, id, "qq2", promo.ChannelQQ); c != lua.CodeOK {
		t.Errorf("QQ after the patch: %s", c)
	}
	if c := grabOn(t, e, id, "web2", promo.ChannelWeb); c != lua.CodeChannelNotAllowed {
		t.Errorf("WEB after the patch: %s", c)
	}
	// A patch of another field leaves them.
	if r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"perPinLimit": 5}); r.Status != http.StatusOK || r.Promotion().Channels != promo.Channels(promo.ChannelQQ) {
		t.Fatalf("patch of perPinLimit: %s", r)
	}
	e.Agree(id, 1)
	r = e.Do(http.MethodPatch, path(id), admin, map[string]any{"channels": []string{}})
	if r.Status != http.StatusOK || r.Promotion().Channels != promo.EveryChannel || strings.Contains(string(r.Body), "channels") {
		t.Fatalf("patch to every channel: %s", r)
	}
	e.Agree(id, 1)
	if c := grabOn(t, e, id, "none", promo.NoChannel); c != lua.CodeOK {
		t.Errorf("no channel after the patch to every channel: %s", c)
	}
	row, _ := e.Row(id, 1)
	if row.Spec.Channels != promo.EveryChannel || row.Version != 4 {
		t.Errorf("row: version %d channels %v", row.Version, row.Spec.Channels.Names())
	}
}

// Every bucket of a promotion in buckets carries its channels, through a patch too.
func TestChannelsReachEveryBucket(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("chan-k")
	spec := bucketSpec(e, id, 4, 100)
	spec["channels"] = []string{"WECHAT"}
	if r := e.Do(http.MethodPost, "/v1/promotions", admin, spec); r.Status != http.StatusCreated {
		t.Fatalf("create: %s", r)
	}
	e.Agree(id, 1) // every bucket's channels are the row's
	hashes, _ := e.Buckets(id, 1, 4)
	for b, h := range hashes {
		if h.Channels != promo.Channels(promo.ChannelWeChat) {
			t.Errorf("bucket %d: channels %v", b, h.Channels.Names())
		}
	}
	if r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"channels": []string{"APP", "QQ"}}); r.Status != http.StatusOK {
		t.Fatalf("patch: %s", r)
	}
	e.Agree(id, 1)
	hashes, _ = e.Buckets(id, 1, 4)
	for b, h := range hashes {
		if h.Channels != promo.Channels(promo.ChannelAPP|promo.ChannelQQ) {
			t.Errorf("bucket %d after the patch: channels %v", b, h.Channels.Names())
		}
	}
}

// A bad channel list is a 400 naming channels or channels[i], and nothing changes.
func TestInvalidChannels(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	cases := []struct {
		channels any
		field    string
	}{
		{"APP", "channels"}, {nil, "channels"}, {map[string]any{"APP": true}, "channels"},
		{[]any{"APP", "SMS"}, "channels[1]"}, {[]any{"QQ", "QQ"}, "channels[1]"},
		{[]any{1}, "channels[0]"}, {[]any{"app"}, "channels[0]"}, {[]any{nil}, "channels[0]"},
	}
	for _, c := range cases {
		id := uid("bad-ch")
		spec := e.Spec(id)
		spec["channels"] = c.channels
		r := e.Do(http.MethodPost, "/v1/promotions", admin, spec)
		if r.Status != http.StatusBadRequest || r.Error().Code != "INVALID_REQUEST" || r.Error().Field != c.field {
			t.Errorf("create with channels %v: want 400 naming %s, have %s", c.channels, c.field, r)
		}
		if _, ok := e.Row(id, 1); ok {
			t.Errorf("channels %v: a row was written", c.channels)
		}
		if _, ok := e.Hash(id, 1); ok {
			t.Errorf("channels %v: a hash was written", c.channels)
		}
	}
	id := uid("patch-ch")
	spec := e.Spec(id)
	spec["channels"] = []string{"APP"}
	if r := e.Do(http.MethodPost, "/v1/promotions", admin, spec); r.Status != http.StatusCreated {
		t.Fatalf("create: %s", r)
	}
	before := e.Snapshot(store.ID{PromoID: id, Type: 1})
	for _, c := range cases {
		r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"channels": c.channels, "total": 50})
		if r.Status != http.StatusBadRequest || r.Error().Field != c.field {
			t.Errorf("patch with channels %v: want 400 naming %s, have %s", c.channels, c.field, r)
		}
	}
	if after := e.Snapshot(store.ID{PromoID: id, Type: 1}); after != before {
		t.Errorf("a refused patch changed something:\nbefore %s\nafter  %s", before, after)
	}
	if h, _ := e.Hash(id, 1); !slices.Equal(h.Channels.Names(), []string{"APP"}) {
		t.Errorf("channels after refused patches: %v", h.Channels.Names())
	}
}
