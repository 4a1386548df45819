package shardpool

import (
	"net"
	"strings"
)

// Allowlist is the servers an on-call override (shardAddrs) may point a shard at,
// fixed at deploy: whoever can write the switches must not be able to send every
// service's Redis password, and its takes, to a server of their choosing. An entry
// is a host (any port), a host:port, or "*.suffix" (any host under a domain, as a
// StatefulSet's pods are). Without entries, the hosts of the configured masters.
func Allowlist(entries, configured []string) func(addr string) bool {
	if len(entries) == 0 {
		for _, a := range configured {
			if host, _, err := net.SplitHostPort(a); err == nil {
				entries = append(entries, host)
			}
		}
	}
	return func(addr string) bool {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return false
		}
		for _, e := range entries {
			switch {
			case e == addr, e == host:
				return true
			case strings.HasPrefix(e, "*.") && strings.HasSuffix(host, e[1:]) && len(host) > len(e)-1:
				return true
			}
		}
		return false
	}
}
