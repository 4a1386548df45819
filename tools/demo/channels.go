package main

import (
	"context"
	"fmt"

	"github.com/flashsale/platform/client"
)

// showChannels sells a promotion on the mobile app only (docs/CONTRACT.md,
// "Channels"): a grab through the main site is refused CHANNEL_NOT_ALLOWED and
// takes nothing, one through the app is granted.
func showChannels(ctx context.Context, pf platform, run string) error {
	id := "app-only-" + run
	spec := client.PromotionSpec{PromoID: id, Type: 1, Title: "demo " + id, Total: 10, PerPinLimit: 1, MaxPerGrab: 1,
		Channels: []client.Channel{client.ChannelApp}}
	if err := pf.create(ctx, spec); err != nil {
		return err
	}
	fmt.Printf("%s: 10 units, sold on %v only\n", id, spec.Channels)
	for _, ch := range []struct {
		channel client.Channel
		want    client.Result
	}{{client.ChannelWeb, client.ResultChannelNotAllowed}, {client.ChannelApp, client.ResultGranted}} {
		req := client.GrabRequest{RequestID: fmt.Sprintf("demo-%s-%s", id, ch.channel), Pin: "buyer-app-" + string(ch.channel),
			IP: "10.77.0.1", Items: []client.Item{{PromoID: id, Type: 1, Num: 1}}, Channel: ch.channel}
		got := pf.grabOnce(ctx, req)
		fmt.Printf("grab on %-6s %s\n", ch.channel, got.result)
		if got.result != string(ch.want) {
			return fmt.Errorf("a grab of %s on %s answered %s, want %s", id, ch.channel, got.result, ch.want)
		}
	}
	return nil
}

// grabOnce sends one buyer's grab and tells what it was answered.
func (p platform) grabOnce(ctx context.Context, req client.GrabRequest) told {
	ctx, cancel := context.WithTimeout(ctx, pressTimeout)
	defer cancel()
	return tell(p.grab.Grab(ctx, req))
}
