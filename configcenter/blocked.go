package configcenter

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/flashsale/platform/internal/promo"
)

// MaxBlocked bounds each of blockedPins and blockedIps: a list on-call builds by
// hand or from a risk feed, applied within a second by every instance.
const MaxBlocked = 1_000_000

// blockedBuyers are the pins and addresses whose grabs are refused BLOCKED at once
// (seeds 002, 003: scalpers and bots). A lookup costs one map read for the pin and
// one per distinct prefix length for the ip, however long the lists.
type blockedBuyers struct {
	pins     map[string]struct{}
	prefixes map[netip.Prefix]struct{} // an address is its own /32 or /128
	lengths4 []int                     // the distinct prefix lengths of IPv4 entries
	lengths6 []int
}

func parseBlockedBuyers(pins, ips []string) (blockedBuyers, error) {
	var b blockedBuyers
	if len(pins) > MaxBlocked || len(ips) > MaxBlocked {
		return b, fmt.Errorf("switches document: blockedPins and blockedIps hold at most %d entries each (%d and %d)", MaxBlocked, len(pins), len(ips))
	}
	if len(pins) > 0 {
		b.pins = make(map[string]struct{}, len(pins))
	}
	for _, p := range pins {
		if !promo.ValidPin(p) {
			return b, fmt.Errorf("switches document: blockedPins entry %q is not a pin (1..128 printable characters)", p)
		}
		b.pins[p] = struct{}{}
	}
	if len(ips) > 0 {
		b.prefixes = make(map[netip.Prefix]struct{}, len(ips))
	}
	for _, s := range ips {
		p, err := parseIPOrPrefix(s)
		if err != nil {
			return b, fmt.Errorf("switches document: blockedIps entry %q is not an address or a CIDR range", s)
		}
		b.prefixes[p] = struct{}{}
		lengths := &b.lengths6
		if p.Addr().Is4() {
			lengths = &b.lengths4
		}
		if !slices.Contains(*lengths, p.Bits()) {
			*lengths = append(*lengths, p.Bits())
		}
	}
	return b, nil
}

// parseIPOrPrefix reads "10.1.2.3", "10.1.0.0/16" or an IPv6 form, masked, with
// IPv4-mapped IPv6 forms taken as IPv4. An IPv6 entry narrower than the prefix the
// per-ip limit counts by (promo.IPv6Prefix) covers that prefix: a buyer holding a
// /64 holds every address in it, so banning one of them alone bans nobody.
func parseIPOrPrefix(s string) (netip.Prefix, error) {
	p, err := parseMasked(s)
	if err == nil && p.Addr().Is6() && p.Bits() > promo.IPv6Prefix() {
		p, err = p.Addr().Prefix(promo.IPv6Prefix())
	}
	return p, err
}

func parseMasked(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("an IPv4-mapped range shorter than /96")
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// blocked reports whether a grab by pin from ip is refused.
func (b *blockedBuyers) blocked(pin, ip string) bool {
	if _, ok := b.pins[pin]; ok {
		return true
	}
	if len(b.prefixes) == 0 {
		return false
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false // the transport refuses a malformed ip before it gets here
	}
	a = a.Unmap()
	lengths := b.lengths6
	if a.Is4() {
		lengths = b.lengths4
	}
	for _, bits := range lengths {
		if p, err := a.Prefix(bits); err == nil {
			if _, ok := b.prefixes[p]; ok {
				return true
			}
		}
	}
	return false
}
