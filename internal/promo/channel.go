package promo

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"strings"
)

// Channel is one sales channel a grab comes through (docs/CONTRACT.md,
// "Channels"): a single bit, so a promotion's channels are a set of them. The
// values are the promotion hash's bitmask (field channels, q.lua) and fixed.
type Channel uint8

const (
	ChannelAPP    Channel = 1 // the mobile app
	ChannelWeChat Channel = 2
	ChannelQQ     Channel = 4
	ChannelWeb    Channel = 8 // the main site
	// NoChannel is a grab that names no channel: allowed only on a promotion
	// sold on every channel.
	NoChannel Channel = 0
)

// channelNames are the contract's names, in bit order.
var channelNames = [...]string{"APP", "WECHAT", "QQ", "WEB"}

// AllChannels lists the contract's channel names in order.
func AllChannels() []string { return channelNames[:] }

// ChannelNamesText is the names for an error message: "APP, WECHAT, QQ, WEB".
var ChannelNamesText = strings.Join(channelNames[:], ", ")

// ParseChannel reads a channel's contract name.
func ParseChannel(s string) (Channel, bool) {
	for i, n := range channelNames {
		if s == n {
			return Channel(1) << i, true
		}
	}
	return NoChannel, false
}

// String is the channel's contract name ("" for NoChannel).
func (c Channel) String() string {
	if bits.OnesCount8(uint8(c)) != 1 || int(bits.TrailingZeros8(uint8(c))) >= len(channelNames) {
		return ""
	}
	return channelNames[bits.TrailingZeros8(uint8(c))]
}

// Channels is the set of channels a promotion is sold on: 0 is every channel
// (a promotion created without channels). As JSON it is the list of names.
type Channels uint8

// EveryChannel is the set of a promotion sold on every channel.
const EveryChannel Channels = 0

// channelMask holds every bit the contract names.
const channelMask = Channels(1<<len(channelNames) - 1)

// Allows reports whether a grab through c may take from a promotion sold on cs:
// every grab when cs is every channel, else only one through a channel of cs.
func (cs Channels) Allows(c Channel) bool {
	return cs == EveryChannel || (c != NoChannel && cs&Channels(c) != 0)
}

// Valid reports whether cs holds only the contract's channels.
func (cs Channels) Valid() bool { return cs&^channelMask == 0 }

// Names lists the channels of cs in the contract's order; nil for every channel.
func (cs Channels) Names() []string {
	var out []string
	for i, n := range channelNames {
		if cs&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// String is the names joined by commas, as MySQL's SET column holds them ("" for
// every channel).
func (cs Channels) String() string { return strings.Join(cs.Names(), ",") }

// ChannelListError names the element of a channel list that is wrong: Index -1
// is the list itself.
type ChannelListError struct {
	Index int
	Msg   string
}

func (e *ChannelListError) Error() string {
	if e.Index < 0 {
		return "channels: " + e.Msg
	}
	return fmt.Sprintf("channels[%d]: %s", e.Index, e.Msg)
}

// ParseChannelList reads a list of channel names, each at most once: the
// request's channels. An empty list is every channel.
func ParseChannelList(names []string) (Channels, error) {
	var cs Channels
	for i, n := range names {
		c, ok := ParseChannel(n)
		if !ok {
			return 0, &ChannelListError{Index: i, Msg: "must be one of " + ChannelNamesText}
		}
		if cs&Channels(c) != 0 {
			return 0, &ChannelListError{Index: i, Msg: n + " is listed twice"}
		}
		cs |= Channels(c)
	}
	return cs, nil
}

// ParseChannelsColumn reads the names joined by commas ("" for every channel), as
// MySQL's SET column and Channels.String write them.
func ParseChannelsColumn(s string) (Channels, error) {
	if s == "" {
		return EveryChannel, nil
	}
	return ParseChannelList(strings.Split(s, ","))
}

// MarshalJSON writes the list of names ([] for every channel).
func (cs Channels) MarshalJSON() ([]byte, error) {
	names := cs.Names()
	if names == nil {
		names = []string{}
	}
	return json.Marshal(names)
}

// UnmarshalJSON reads a list of names, as ParseChannelList.
func (cs *Channels) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return fmt.Errorf("channels: %w", err)
	}
	v, err := ParseChannelList(names)
	if err != nil {
		return err
	}
	*cs = v
	return nil
}
