package grabtransport_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

var appOnly = promo.Channels(promo.ChannelAPP)

// onChannel is body sent through channel.
func onChannel(body map[string]any, channel string) map[string]any {
	body["channel"] = channel
	return body
}

// grabEvent is the GRAB the publisher acknowledged for rid, and whether there is one.
func (e *env) grabEvent(rid string) (flow.Event, bool) {
	for _, ev := range e.pub.Events() {
		if ev.Kind == flow.Grab && ev.RequestID == e.rid(rid) {
			return ev, true
		}
	}
	return flow.Event{}, false
}

// An item of a promotion not sold on the grab's channel is refused 409
// CHANNEL_NOT_ALLOWED, naming it, and the other shard's item takes nothing; on
// its channel the grab is granted and its GRAB carries the channel.
func TestGrabOnAChannelNotSoldIsRefusedWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	every, app := e.twoShards("ch-every", "ch-app", spec{total: 10}, spec{total: 10, channels: appOnly})
	for _, c := range []struct{ rid, channel string }{{"web", "WEB"}, {"qq", "QQ"}, {"none", ""}} {
		body := grabBody(c.rid, "buyer-"+c.rid, "10.9.0.1", every, 2, app, 1)
		if c.channel != "" {
			onChannel(body, c.channel)
		}
		r := e.grab(body)
		if r.status != http.StatusConflict || r.res.Result != grab.ChannelNotAllowed || r.res.FailedItem == nil || *r.res.FailedItem != 1 {
			t.Fatalf("%s: want 409 CHANNEL_NOT_ALLOWED failedItem 1, have %d %s", c.rid, r.status, r.raw)
		}
		if n := e.held(every, "pin", "buyer-"+c.rid); n != 0 {
			t.Errorf("%s: the other shard's item holds %d", c.rid, n)
		}
	}
	if h := e.hash(every); h.Remaining != 10 {
		t.Errorf("every-channel promotion remaining %d after the refusals", h.Remaining)
	}
	if h := e.hash(app); h.Remaining != 10 {
		t.Errorf("app promotion remaining %d after the refusals", h.Remaining)
	}
	if n := countEvents(e.pub.Events(), flow.Grab); n != 0 {
		t.Errorf("%d GRAB events for refused grabs", n)
	}
	r := e.grab(onChannel(grabBody("app", "buyer-app", "10.9.0.1", every, 2, app, 1), "APP"))
	if r.status != http.StatusOK || r.res.Result != grab.Granted {
		t.Fatalf("on APP: %d %s", r.status, r.raw)
	}
	if ev, ok := e.grabEvent("app"); !ok || ev.Channel != "APP" {
		t.Errorf("the GRAB of the APP grab: %+v (found %v)", ev, ok)
	}
	// A resend replays; the same requestId on another channel is another body.
	if r := e.grab(onChannel(grabBody("app", "buyer-app", "10.9.0.1", every, 2, app, 1), "APP")); r.status != http.StatusOK || r.res.Result != grab.Granted {
		t.Errorf("resend: %d %s", r.status, r.raw)
	}
	if r := e.grab(onChannel(grabBody("app", "buyer-app", "10.9.0.1", every, 2, app, 1), "WEB")); r.res.Result != grab.RequestIDReused {
		t.Errorf("the requestId on WEB: %d %s", r.status, r.raw)
	}
	// A promotion of every channel takes a grab without channel; its GRAB names none.
	if r := e.grab(grabBody("plain", "buyer-plain", "10.9.0.1", every, 1)); r.status != http.StatusOK {
		t.Fatalf("no channel, every channel: %d %s", r.status, r.raw)
	}
	if ev, ok := e.grabEvent("plain"); !ok || ev.Channel != "" {
		t.Errorf("the GRAB of a grab without channel: %+v (found %v)", ev, ok)
	}
	if h := e.hash(every); h.Remaining != 7 {
		t.Errorf("every-channel promotion remaining %d, want 7", h.Remaining)
	}
}

// A stopped or ended promotion keeps its own answer on a channel it is not sold on.
func TestChannelRefusalComesAfterTheSalesState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ended := e.promotion("ch-ended", spec{total: 3, channels: appOnly, start: e.clock.Now().Add(-2 * time.Hour), end: e.clock.Now().Add(-time.Hour)})
	if r := e.grab(onChannel(grabBody("late", "p1", "10.9.0.2", ended, 1), "WEB")); r.res.Result != grab.Ended {
		t.Errorf("ended, on WEB: %d %s", r.status, r.raw)
	}
	early := e.promotion("ch-early", spec{total: 3, channels: appOnly, start: e.clock.Now().Add(time.Hour)})
	if r := e.grab(onChannel(grabBody("early", "p1", "10.9.0.2", early, 1), "WEB")); r.res.Result != grab.NotStarted {
		t.Errorf("not started, on WEB: %d %s", r.status, r.raw)
	}
}

// Every bucket of a bucketed promotion carries its channels.
func TestBucketedGrabFollowsTheChannels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id, l := e.bucketed("ch-b", 4, spec{total: 8, perPin: 5, channels: appOnly})
	for i, k := range l.Keys {
		if h := e.hashOf(k, l.Shards[i]); h.Channels != appOnly {
			t.Fatalf("bucket %d: channels %v", i, h.Channels.Names())
		}
	}
	for i, pin := range []string{"b1", "b2", "b3", "b4", "b5"} {
		r := e.grab(onChannel(grabBody("bw-"+pin, pin, "10.9.1.1", id, 1), "WECHAT"))
		if r.status != http.StatusConflict || r.res.Result != grab.ChannelNotAllowed || r.res.FailedItem == nil || *r.res.FailedItem != 0 {
			t.Fatalf("grab %d on WECHAT: %d %s", i, r.status, r.raw)
		}
	}
	remaining, pins, _ := e.buckets(id, l)
	if sum(remaining) != 8 || len(pins) != 0 {
		t.Fatalf("refused grabs left remaining %v, pins %v", remaining, pins)
	}
	if r := e.grab(onChannel(grabBody("ba", "b1", "10.9.1.1", id, 2), "APP")); r.status != http.StatusOK {
		t.Fatalf("on APP: %d %s", r.status, r.raw)
	}
	if remaining, _, _ = e.buckets(id, l); sum(remaining) != 6 {
		t.Errorf("remaining %v after 2 granted", remaining)
	}
}

func TestGrabChannelIsValidated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.promotion("ch-valid", spec{total: 5})
	for _, bad := range []any{"SMS", "app", "", 1, []string{"APP"}} {
		body := grabBody("bad", "p1", "10.9.2.1", id, 1)
		body["channel"] = bad
		r := e.grab(body)
		if r.status != http.StatusBadRequest || r.err.Code != "INVALID_REQUEST" || r.err.Field != "channel" {
			t.Errorf("channel %v: %d %s", bad, r.status, r.raw)
		}
	}
	if h := e.hash(id); h.Remaining != 5 {
		t.Errorf("remaining %d after invalid grabs", h.Remaining)
	}
}

func TestStatusShowsTheChannels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	app := e.promotion("ch-st", spec{total: 5, channels: appOnly | promo.Channels(promo.ChannelWeb)})
	if r := e.do("GET", "/v1/promotions/"+app+"/1/status", "", nil); r.status != 200 || !strings.Contains(r.raw, `"channels":["APP","WEB"]`) {
		t.Errorf("status: %d %s", r.status, r.raw)
	}
	every := e.promotion("ch-st-all", spec{total: 5})
	if r := e.do("GET", "/v1/promotions/"+every+"/1/status", "", nil); r.status != 200 || strings.Contains(r.raw, "channels") {
		t.Errorf("status of every channel: %d %s", r.status, r.raw)
	}
}

// hashOf reads the hash key on shard.
func (e *env) hashOf(key string, shard int) lua.HashState {
	e.t.Helper()
	h, found, err := lua.ReadHash(context.Background(), e.shards[shard], key)
	if err != nil || !found {
		e.t.Fatalf("read %s: found=%v err=%v", key, found, err)
	}
	return h
}
