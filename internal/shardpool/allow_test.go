package shardpool_test

import (
	"testing"

	"github.com/flashsale/platform/internal/shardpool"
)

func TestAllowlist(t *testing.T) {
	defaults := shardpool.Allowlist(nil, []string{"127.0.0.1:7001", "127.0.0.1:7002"})
	listed := shardpool.Allowlist([]string{"redis-replica-3:6379", "redis-shard-*", "redis-shard-*.redis-shard-*", "10.0.0.9"}, nil)
	for _, tc := range []struct {
		allow func(string) bool
		addr  string
		want  bool
	}{
		{defaults, "127.0.0.1:7106", true}, // another port of a configured host: the local stack's replicas
		{defaults, "localhost:7016", true}, // the loopback by another name
		{defaults, "[::1]:7016", true},
		{defaults, "evil.example:6379", false},
		{defaults, "127.0.0.1", false}, // no port: not an address
		{listed, "redis-replica-3:6379", true},
		{listed, "redis-replica-3:6380", false},
		{listed, "redis-shard-5-master:6379", true},
		{listed, "redis-shard-5-1.redis-shard-5:6379", true},
		{listed, "redis-shard-x.attacker.example:6379", false}, // a glob never crosses a dot
		{listed, "redis-shard-5-1.redis-shard-5.attacker.example:6379", false},
		{listed, "10.0.0.9:1234", true},
		{listed, "10.0.0.99:6379", false},
	} {
		if have := tc.allow(tc.addr); have != tc.want {
			t.Errorf("%s: allowed %v, want %v", tc.addr, have, tc.want)
		}
	}
}
