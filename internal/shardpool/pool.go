// Package shardpool routes a promotion key to the Redis client of its logical shard.
// The ring (internal/ring) names the shard; configuration names each shard's
// master address. Several shards may share one address (the local stack may run
// fewer servers than shards): they then share one client and its connection pool.
package shardpool

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/ring"
)

// Pool holds one client per distinct address and the shard -> client table.
// It is safe for concurrent use; Close it once when done.
type Pool struct {
	targets [ring.Shards]*target // where each shard's client dials (redirect.go)
	clients [ring.Shards]*redis.Client
	byAddr  map[string]*redis.Client
	// mu orders moves; onCall and elected are the last accepted of each source.
	mu              sync.Mutex
	onCall, elected map[int]string
}

// Protocol is the RESP version every service speaks to the shards. RESP2: on
// RESP3 go-redis looks for push notifications before every reply it reads (4% of
// grab-service's CPU in the hot phase); nothing subscribes to any, and the
// scripts return no RESP3-only type. Test clients use it too, so the replies the
// tests parse are the ones the services get.
const Protocol = 2

// New builds the pool from exactly ring.Shards addresses (index = logical shard).
// opts is the template of every client: its Addr is replaced by each address and
// its Protocol set to Protocol.
func New(addrs []string, opts redis.Options) (*Pool, error) {
	if len(addrs) != ring.Shards {
		return nil, fmt.Errorf("shardpool: %d redis addresses given, want exactly %d (index = logical shard)", len(addrs), ring.Shards)
	}
	p := &Pool{byAddr: make(map[string]*redis.Client)}
	targets := map[string]*target{}
	for i, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, fmt.Errorf("shardpool: empty redis address for shard %d", i)
		}
		c, ok := p.byAddr[a]
		if !ok {
			targets[a] = newTarget(a, opts.TLSConfig)
			o := opts
			o.Addr, o.Protocol, o.Dialer = a, Protocol, targets[a].dial
			c = redis.NewClient(&o)
			p.byAddr[a] = c
		}
		p.targets[i], p.clients[i] = targets[a], c
	}
	return p, nil
}

// For returns key's logical shard and the client of its master.
func (p *Pool) For(key string) (shard int, c *redis.Client) {
	shard = ring.Default.Shard(key)
	return shard, p.clients[shard]
}

// Client returns the client of a logical shard; it panics on a shard outside 0..15.
func (p *Pool) Client(shard int) *redis.Client { return p.clients[shard] }

// Addr returns the address a logical shard's client dials now: the configured
// one, or where the config center moved it (Move).
func (p *Pool) Addr(shard int) string { return p.targets[shard].current() }

// Generation counts a shard's moves to another server (Move): a command whose
// shard's generation changed while it ran may have run on the new server, which
// no one has judged whole yet (grab-service's fence).
func (p *Pool) Generation(shard int) uint64 { return p.targets[shard].gen.Load() }

// Servers returns one client per distinct address, ordered by address (for work
// done once per server, such as loading scripts).
func (p *Pool) Servers() []*redis.Client {
	addrs := make([]string, 0, len(p.byAddr))
	for a := range p.byAddr {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	out := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		out[i] = p.byAddr[a]
	}
	return out
}

// ShardError names the shards whose server did not answer.
type ShardError struct {
	Shards []int          // failing logical shards, ascending
	Errs   map[int]error  // the cause, per failing shard
	Addrs  map[int]string // the address, per failing shard
}

func (e *ShardError) Error() string {
	parts := make([]string, 0, len(e.Shards))
	for _, s := range e.Shards {
		parts = append(parts, fmt.Sprintf("redis shard %d (%s): %v", s, e.Addrs[s], e.Errs[s]))
	}
	return strings.Join(parts, "; ")
}

// Ping pings every distinct server at once and returns a *ShardError naming each
// logical shard whose server failed, or nil when all answer.
func (p *Pool) Ping(ctx context.Context) error {
	type result struct {
		addr string
		err  error
	}
	results := make(chan result, len(p.byAddr))
	var wg sync.WaitGroup
	for a, c := range p.byAddr {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- result{a, c.Ping(ctx).Err()}
		}()
	}
	wg.Wait()
	close(results)
	failed := map[string]error{}
	for r := range results {
		if r.err != nil {
			failed[r.addr] = r.err
		}
	}
	if len(failed) == 0 {
		return nil
	}
	e := &ShardError{Errs: map[int]error{}, Addrs: map[int]string{}}
	for s, t := range p.targets {
		if err, ok := failed[t.configured]; ok {
			e.Shards = append(e.Shards, s)
			e.Errs[s], e.Addrs[s] = err, t.current()
		}
	}
	sort.Ints(e.Shards)
	return e
}

// Close closes every client once.
func (p *Pool) Close() error {
	var errs []error
	for a, c := range p.byAddr {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close redis %s: %w", a, err))
		}
	}
	return errors.Join(errs...)
}
