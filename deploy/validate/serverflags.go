package validate

import (
	"fmt"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
)

// RedisAllowEnv is --redis-allow's environment variable (svc.RedisAllowEnv).
const RedisAllowEnv = "FLASHSALE_REDIS_ALLOW"

// A listener's connection bound (--max-conns, internal/svc/conns.go): production
// names it, never relying on the binary's default, and keeps it where a bound is a
// bound (0 would be none) and one instance's file descriptors can hold it.
const (
	MinMaxConns = 1
	MaxMaxConns = 100000
)

// DefaultIPv6Prefix is --ipv6-prefix's default (promo.DefaultIPv6Prefix).
const DefaultIPv6Prefix = "64"

// IPv6PrefixCommands take --ipv6-prefix, where the binaries are not built to ask:
// grab-service counts takes by it, recovery's rebuild, verify and the sink's healer
// recompute the same counters by it.
var IPv6PrefixCommands = map[string]bool{"grab-service": true, "recovery sink": true, "recovery verify": true, "recovery rebuild": true}

// checkRedisAllow: a process that reaches Redis runs with --redis-allow (or
// FLASHSALE_REDIS_ALLOW): the servers on-call's shardAddrs may point a shard at,
// and so where the service sends its Redis password and its takes. They are the
// shards' own servers and nothing else (CheckRedisAllow).
func checkRedisAllow(inv Invocation, flags map[string]string, want Expected, errs *Errs) {
	list, ok := flags["redis-allow"]
	if !ok {
		list, ok = inv.EnvValue[RedisAllowEnv]
	}
	if !ok && inv.Env[RedisAllowEnv] {
		errs.Addf("%s: %s must be a literal list in the deploy file, which is what is checked", inv.Where, RedisAllowEnv)
		return
	}
	if !ok {
		errs.Addf("%s: runs without --redis-allow (or %s): the shards' own servers are the only ones on-call's shardAddrs may name", inv.Where, RedisAllowEnv)
		return
	}
	for _, p := range CheckRedisAllow(list, want) {
		errs.Addf("%s: --redis-allow %q: %s", inv.Where, list, p)
	}
}

// CheckRedisAllow lists what is wrong with an allowlist: an entry must name some
// shard server (want.ShardHosts) and, where a label is a glob, start it with a
// shard's name prefix (want.ShardPrefixes), so it cannot name another server; a
// port, if any, is a shard's; and each --redis master is allowed.
func CheckRedisAllow(list string, want Expected) []string {
	var out []string
	entries := splitList(list)
	if len(entries) == 0 {
		return []string{"empty"}
	}
	ports := map[string]bool{}
	for _, m := range want.Redis {
		if _, p, err := net.SplitHostPort(m); err == nil {
			ports[p] = true
		}
	}
	for _, e := range entries {
		host, port, err := net.SplitHostPort(e)
		if err != nil {
			host, port = e, ""
		}
		if port != "" && !ports[port] {
			out = append(out, fmt.Sprintf("%s: port %s is no shard's", e, port))
		}
		if !slices.ContainsFunc(want.ShardHosts, func(h string) bool { return hostMatches(host, h) }) {
			out = append(out, fmt.Sprintf("%s names no shard server (the shards are %s...)", e, strings.Join(want.ShardHosts[:min(3, len(want.ShardHosts))], ", ")))
			continue
		}
		for _, label := range strings.Split(host, ".") {
			i := strings.IndexAny(label, `*?[\`)
			if i >= 0 && !slices.ContainsFunc(want.ShardPrefixes, func(p string) bool { return strings.HasPrefix(label[:i], p) }) {
				out = append(out, fmt.Sprintf("%s: the glob label %q could name a server that is no shard; a glob follows a shard's name prefix %v", e, label, want.ShardPrefixes))
			}
		}
	}
	for _, m := range want.Redis {
		host, port, _ := net.SplitHostPort(m)
		if !slices.ContainsFunc(entries, func(e string) bool {
			eh, ep, err := net.SplitHostPort(e)
			if err != nil {
				eh, ep = e, ""
			}
			return (ep == "" || ep == port) && hostMatches(eh, host)
		}) {
			out = append(out, fmt.Sprintf("the shard master %s is not allowed", m))
		}
	}
	return out
}

// hostMatches is shardpool's: host against pattern label by label, globs never
// crossing a dot.
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

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// checkMaxConns: a server names its listeners' connection bound.
func checkMaxConns(inv Invocation, flags map[string]string, errs *Errs) {
	v, ok := flags["max-conns"]
	if !ok {
		errs.Addf("%s: a server sets --max-conns explicitly (%d..%d): the binary's default is no deploy decision", inv.Where, MinMaxConns, MaxMaxConns)
		return
	}
	if n, err := strconv.Atoi(v); err != nil || n < MinMaxConns || n > MaxMaxConns {
		errs.Addf("%s: --max-conns %q outside %d..%d (0 would be no bound)", inv.Where, v, MinMaxConns, MaxMaxConns)
	}
}

// takesIPv6Prefix: whether the invocation's command has --ipv6-prefix (its binary's
// -h, else IPv6PrefixCommands).
func takesIPv6Prefix(inv Invocation) bool {
	cmd := inv.Command()
	if inv.Binary == "configctl" || RecordOnly[strings.Join(cmd, " ")] {
		return false
	}
	if known, err := BinaryFlags(cmd); err == nil && known != nil {
		_, ok := known["ipv6-prefix"]
		return ok
	}
	return IPv6PrefixCommands[strings.Join(cmd, " ")]
}

// CheckIPv6PrefixAgree: every process of one deployment that counts buyers by ip
// counts an IPv6 address by the same prefix. grab-service takes a buyer's per-ip
// count under its prefix's key and the rebuild (recovery rebuild, the sink's healer)
// recomputes the counters under its own: two prefixes leave counters no take owns.
func CheckIPv6PrefixAgree(invs []Invocation, errs *Errs) {
	var first *Invocation
	firstVal := ""
	for i, inv := range invs {
		if !takesIPv6Prefix(inv) {
			continue
		}
		bools := map[string]bool{}
		if known, _ := BinaryFlags(inv.Command()); known != nil {
			for f, v := range known {
				bools[f] = !v
			}
		}
		flags, _ := inv.Flags(bools)
		v, ok := flags["ipv6-prefix"]
		if !ok {
			v = DefaultIPv6Prefix
		}
		if n, err := strconv.Atoi(v); err != nil || n < 0 || n > 128 {
			errs.Addf("%s: --ipv6-prefix %q outside 0..128", inv.Where, v)
			continue
		}
		if first == nil {
			first, firstVal = &invs[i], v
		} else if v != firstVal {
			errs.Addf("%s: --ipv6-prefix %s, but %s counts by %s: grab-service and recovery must count IPv6 buyers by the same prefix", inv.Where, v, first.Where, firstVal)
		}
	}
}

// diff is what have holds beyond want, and what it lacks.
func diff(have, want []string) (extra, missing []string) {
	for _, h := range have {
		if !slices.Contains(want, h) {
			extra = append(extra, h)
		}
	}
	for _, w := range want {
		if !slices.Contains(have, w) {
			missing = append(missing, w)
		}
	}
	return extra, missing
}
