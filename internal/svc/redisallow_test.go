package svc

import (
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/flashsale/platform/internal/shardpool"
)

// --redis-allow's default comes from FLASHSALE_REDIS_ALLOW, so a pod can set it once
// beside the Redis credentials; the flag, when given, wins. Either way the list is
// what the shardAddrs allowlist holds, and a server outside it is refused.
func TestRedisAllowFromTheEnvironment(t *testing.T) {
	cases := []struct {
		name, env string
		args      []string
		want      []string
	}{
		{"neither", "", nil, nil},
		{"the environment", "redis-shard-*, redis-shard-*.redis-shard-*", nil, []string{"redis-shard-*", "redis-shard-*.redis-shard-*"}},
		{"the flag wins", "redis-shard-*", []string{"--redis-allow", "redis-master-*"}, []string{"redis-master-*"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(RedisAllowEnv, c.env)
			var f Flags
			fs := flag.NewFlagSet("svc", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.Register(fs, ":0", ":0")
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(f.RedisAllow, c.want) {
				t.Fatalf("RedisAllow %q, want %q", f.RedisAllow, c.want)
			}
			allowed := shardpool.Allowlist(f.RedisAllow, []string{"redis-shard-0-master:6379"})
			if allowed("attacker.example.com:6379") {
				t.Errorf("a foreign server allowed by %q", f.RedisAllow)
			}
			if c.env != "" && !allowed(c.want[0][:len(c.want[0])-1]+"3:6379") {
				t.Errorf("a server of the list %q refused", f.RedisAllow)
			}
		})
	}
}
