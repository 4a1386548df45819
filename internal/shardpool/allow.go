package shardpool

import (
	"net"
	"path"
	"strings"
)

// Allowlist is the servers an on-call override (shardAddrs) may point a shard at,
// fixed at deploy: whoever can write the switches must not be able to send every
// service's Redis password, and its takes, to a server of their choosing. An entry
// is a host (any port) or a host:port, where a host's labels may be globs that
// never cross a dot ("redis-shard-*.redis-shard-*" names a StatefulSet's pods and
// nothing under another domain). Without entries, the hosts of the configured
// masters (hostsOf).
func Allowlist(entries, configured []string) func(addr string) bool {
	if len(entries) == 0 {
		entries = hostsOf(configured)
	}
	return func(addr string) bool {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			return false
		}
		for _, e := range entries {
			eh, ep, err := net.SplitHostPort(e)
			if err != nil {
				eh, ep = e, ""
			}
			if (ep == "" || ep == port) && hostMatches(eh, host) {
				return true
			}
		}
		return false
	}
}

// hostMatches matches host against pattern label by label.
func hostMatches(pattern, host string) bool {
	pl, hl := strings.Split(pattern, "."), strings.Split(host, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if ok, err := path.Match(pl[i], hl[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// hostsOf is the hosts of addrs; a loopback one brings the loopback's other names
// (the local stack's servers are 127.0.0.1, localhost and ::1 alike).
func hostsOf(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		out = append(out, host)
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			out = append(out, "localhost", "127.0.0.1", "::1")
		}
	}
	return out
}
