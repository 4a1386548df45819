package promo

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestChannelBitsAreTheHashBitmask(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]Channel{"APP": 1, "WECHAT": 2, "QQ": 4, "WEB": 8} {
		c, ok := ParseChannel(name)
		if !ok || c != want || c.String() != name {
			t.Errorf("ParseChannel(%q) = %d %v (%q), want %d", name, c, ok, c.String(), want)
		}
	}
	for _, bad := range []string{"", "app", "Web", "SMS", "APP,WEB"} {
		if _, ok := ParseChannel(bad); ok {
			t.Errorf("ParseChannel(%q) accepted", bad)
		}
	}
}

func TestChannelsAllow(t *testing.T) {
	t.Parallel()
	app := Channels(ChannelAPP)
	cases := []struct {
		cs   Channels
		c    Channel
		want bool
	}{
		{EveryChannel, NoChannel, true}, {EveryChannel, ChannelWeb, true},
		{app, ChannelAPP, true}, {app, ChannelWeb, false}, {app, NoChannel, false},
		{app | Channels(ChannelQQ), ChannelQQ, true},
	}
	for _, c := range cases {
		if got := c.cs.Allows(c.c); got != c.want {
			t.Errorf("%v.Allows(%v) = %v, want %v", c.cs.Names(), c.c, got, c.want)
		}
	}
}

func TestChannelListNamesTheBadElement(t *testing.T) {
	t.Parallel()
	cs, err := ParseChannelList([]string{"WEB", "APP"})
	if err != nil || cs != Channels(ChannelAPP|ChannelWeb) || cs.String() != "APP,WEB" {
		t.Fatalf("ParseChannelList = %v %v", cs, err)
	}
	for _, c := range []struct {
		in    []string
		index int
	}{{[]string{"APP", "SMS"}, 1}, {[]string{"QQ", "QQ"}, 1}, {[]string{""}, 0}} {
		_, err := ParseChannelList(c.in)
		var le *ChannelListError
		if !errors.As(err, &le) || le.Index != c.index {
			t.Errorf("ParseChannelList(%q) = %v, want an error at %d", c.in, err, c.index)
		}
	}
	if cs, err := ParseChannelsColumn(""); err != nil || cs != EveryChannel {
		t.Errorf("ParseChannelsColumn(\"\") = %v %v", cs, err)
	}
}

func TestSpecChannelsJSON(t *testing.T) {
	t.Parallel()
	b, _ := json.Marshal(Spec{PromoID: "a", Channels: Channels(ChannelWeChat | ChannelQQ)})
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil || back.Channels != Channels(ChannelWeChat|ChannelQQ) {
		t.Fatalf("round trip of %s: %v %v", b, back.Channels, err)
	}
	b, _ = json.Marshal(Spec{PromoID: "a"})
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if _, ok := m["channels"]; ok {
		t.Errorf("a spec of every channel writes channels: %s", b)
	}
}
