package validate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// SentinelPrefix is the name the sentinels monitor shard N's master under (prefix+N),
// the services' --redis-sentinel-prefix default.
const SentinelPrefix = "shard-"

// SentinelUsers are the ACL users the services authenticate to a sentinel as (their
// Redis users: FLASHSALE_REDIS_USERNAME).
var SentinelUsers = []string{"grab-service", "promo-admin", "recovery"}

// CheckSentinelConf checks a sentinel's config, as its start script writes it, for a
// deployment of `sentinels` sentinels: every shard's master monitored under its name
// with a majority quorum, declared down after 1 to 5 s, reached with the shards'
// password; the sentinel itself behind a password, with a user per service that may
// ask where a master is and nothing else.
func CheckSentinelConf(conf string, sentinels int) []string {
	var errs []string
	monitored := map[string]bool{}
	set := map[string]map[string]string{} // directive -> master -> value
	directives := map[string]string{}
	users := map[string]string{}
	for _, line := range strings.Split(conf, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case f[0] == "sentinel" && len(f) >= 6 && f[1] == "monitor":
			monitored[f[2]] = true
			q, err := strconv.Atoi(f[5])
			if err != nil || q <= sentinels/2 || q > sentinels {
				errs = append(errs, fmt.Sprintf("%s: quorum %s, want a majority of %d sentinels", f[2], f[5], sentinels))
			}
		case f[0] == "sentinel" && len(f) >= 4:
			if set[f[1]] == nil {
				set[f[1]] = map[string]string{}
			}
			set[f[1]][f[2]] = f[3]
		case f[0] == "user" && len(f) >= 2:
			users[f[1]] = strings.Join(f[2:], " ")
		default:
			directives[f[0]] = strings.Join(f[1:], " ")
		}
	}
	for i := 0; i < Shards; i++ {
		name := SentinelPrefix + strconv.Itoa(i)
		if !monitored[name] {
			errs = append(errs, fmt.Sprintf("shard %d's master is not monitored as %s", i, name))
			continue
		}
		if ms, err := strconv.Atoi(set["down-after-milliseconds"][name]); err != nil || ms < 1000 || ms > 5000 {
			errs = append(errs, fmt.Sprintf("%s: down-after-milliseconds %q, want 1000..5000", name, set["down-after-milliseconds"][name]))
		}
		if set["auth-pass"][name] == "" {
			errs = append(errs, fmt.Sprintf("%s: no auth-pass: the shards require a password", name))
		}
	}
	if directives["requirepass"] == "" {
		errs = append(errs, "no requirepass: anyone on the network could move a master")
	}
	for _, u := range SentinelUsers {
		rules := strings.Fields(users[u])
		if !slices.Contains(rules, "on") || !slices.Contains(rules, "-@all") || !slices.Contains(rules, "+sentinel|get-master-addr-by-name") {
			errs = append(errs, fmt.Sprintf("user %s: %q, want one that may only ask where a master is (-@all +sentinel|get-master-addr-by-name)", u, users[u]))
		}
		for _, r := range rules {
			if strings.HasPrefix(r, "+") && !slices.Contains([]string{"+auth", "+hello", "+ping", "+sentinel|get-master-addr-by-name"}, r) {
				errs = append(errs, fmt.Sprintf("user %s may run %s", u, r))
			}
		}
	}
	return errs
}
