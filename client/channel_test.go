package client

import (
	"encoding/json"
	"testing"
	"time"
)

// The channel fields are written as api/openapi.yaml names them: a grab's channel
// and a spec's channels only when set, a patch's [] (every channel again) as [].
func TestChannelsJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    any
		want string
	}{
		{onChannel(order(Item{PromoID: "a", Type: 1, Num: 1}), ChannelApp),
			`{"requestId":"r","pin":"p","ip":"10.0.0.1","items":[{"promoId":"a","type":1,"num":1}],"channel":"APP"}`},
		{order(), `{"requestId":"r","pin":"p","ip":"10.0.0.1","items":[]}`},
		{PromotionPatch{Channels: EveryChannel()}, `{"channels":[]}`},
		{PromotionPatch{Channels: &[]Channel{ChannelWeChat, ChannelQQ}}, `{"channels":["WECHAT","QQ"]}`},
		{PromotionPatch{}, `{}`},
	} {
		if have := wire(t, c.v); have != c.want {
			t.Errorf("%T: %s, want %s", c.v, have, c.want)
		}
	}
	spec := PromotionSpec{PromoID: "a", Type: 1, Total: 1, StartAt: time.Unix(0, 0).UTC(), EndAt: time.Unix(60, 0).UTC(), Channels: []Channel{ChannelWeb}}
	if ch, ok := wireFields(t, spec)["channels"].([]any); !ok || len(ch) != 1 || ch[0] != "WEB" {
		t.Errorf("spec: %s", wire(t, spec))
	}
	var p Promotion
	if err := json.Unmarshal([]byte(`{"promoId":"a","type":1,"channels":["APP","WEB"]}`), &p); err != nil || len(p.Channels) != 2 || p.Channels[1] != ChannelWeb {
		t.Errorf("promotion: %+v %v", p.Channels, err)
	}
}

// onChannel is r sent through channel c.
func onChannel(r GrabRequest, c Channel) GrabRequest {
	r.Channel = c
	return r
}
