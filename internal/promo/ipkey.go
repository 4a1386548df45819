package promo

import (
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"sync/atomic"
)

// DefaultIPv6Prefix is the prefix an IPv6 buyer is counted by: one /64 is what a
// single subscriber is handed, so counting its addresses apart would make a per-ip
// limit no limit at all.
const DefaultIPv6Prefix = 64

var ipv6Prefix atomic.Int32

func init() { ipv6Prefix.Store(DefaultIPv6Prefix) }

// SetIPv6Prefix sets the prefix IPCounterKey counts IPv6 addresses by (the services'
// and recovery's --ipv6-prefix): 0..128, 128 counting each address alone. Every
// service and the rebuild must use the same, as a take's counter is released and
// rebuilt under the key it was counted by.
func SetIPv6Prefix(bits int) error {
	if bits < 0 || bits > 128 {
		return fmt.Errorf("ipv6 prefix %d outside 0..128", bits)
	}
	ipv6Prefix.Store(int32(bits))
	return nil
}

// IPv6PrefixFlag registers --ipv6-prefix on fs, which calls SetIPv6Prefix.
func IPv6PrefixFlag(fs *flag.FlagSet) {
	fs.Func("ipv6-prefix", fmt.Sprintf("bits of an IPv6 address a buyer is counted by in the per-ip limits and blockedIps, 0..128 "+
		"(default %d; 128 counts each address alone); grab-service and recovery must agree", DefaultIPv6Prefix),
		func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil {
				return err
			}
			return SetIPv6Prefix(n)
		})
}

// IPv6Prefix is the prefix set by SetIPv6Prefix (DefaultIPv6Prefix unless set).
func IPv6Prefix() int { return int(ipv6Prefix.Load()) }

// IPKey is the field a per-ip limit counts ip under: an IPv4 address (or an
// IPv4-mapped IPv6 one, unmapped) as it is, an IPv6 address as its v6Prefix-bit
// prefix in canonical form ("2001:db8:1:2::/64"), or itself at 128. A string that
// is no address is its own key: the transport refuses those before a take.
func IPKey(ip string, v6Prefix int) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Zone() != "" {
		return ip
	}
	if a = a.Unmap(); a.Is4() || v6Prefix >= 128 {
		return a.String()
	}
	p, err := a.Prefix(max(v6Prefix, 0))
	if err != nil {
		return ip
	}
	return p.String()
}

// IPCounterKey is IPKey under the process's prefix (SetIPv6Prefix): what the take,
// a bucketed grab's ip home, the bans and the rebuild all count an ip by.
func IPCounterKey(ip string) string { return IPKey(ip, IPv6Prefix()) }

// ByIPKey folds per-address counts (the record's, by full address) into per-key
// counts, as q.lua holds them in {..}:ips; zero sums are left out.
func ByIPKey(byIP map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(byIP))
	for ip, n := range byIP {
		out[IPCounterKey(ip)] += n
	}
	for k, n := range out {
		if n == 0 {
			delete(out, k)
		}
	}
	return out
}
