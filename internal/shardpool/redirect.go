package shardpool

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sort"
	"sync/atomic"
	"time"
)

// A server's client dials wherever its target points: the configured address
// until the config center points the server's shards elsewhere (a failover to a
// promoted replica, docs/RUNBOOK.md). Moving the target drops every connection
// to the old server at its next write, before a byte of it is sent, with io.EOF:
// go-redis takes that for a dead connection and sends the command again on a new
// one, which dials the new server. So no command reaches the old server after the
// move, and none fails for it. A reply already on its way from the old server is
// still read: its command was sent there, and sending it again could run it twice.

// target is where one configured server's client dials now.
type target struct {
	configured string
	tls        *tls.Config // the client's TLS (redis.Options.TLSConfig): this dialer does it
	addr       atomic.Pointer[string]
	gen        atomic.Uint64 // bumped by every move; a connection of an older one is dropped
}

func newTarget(configured string, tlsConfig *tls.Config) *target {
	t := &target{configured: configured, tls: tlsConfig}
	t.addr.Store(&configured)
	return t
}

func (t *target) current() string { return *t.addr.Load() }

// moveTo points the client at addr; it reports whether that changed anything.
func (t *target) moveTo(addr string) bool {
	if t.current() == addr {
		return false
	}
	t.addr.Store(&addr)
	t.gen.Add(1)
	return true
}

// dial is the client's dialer: the target's address, whatever the client asks.
func (t *target) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	gen := t.gen.Load()
	addr := t.current()
	d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 5 * time.Minute}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if t.tls != nil { // go-redis leaves TLS to a dialer of one's own
		cfg := t.tls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("tls to %s: %w", addr, err)
		}
		c = tc
	}
	return &movableConn{Conn: c, t: t, gen: gen}, nil
}

// movableConn fails every use once its server's target has moved.
type movableConn struct {
	net.Conn
	t   *target
	gen uint64
}

// Write refuses, as a closed connection would, once the server has moved.
func (c *movableConn) Write(b []byte) (int, error) {
	if c.t.gen.Load() != c.gen {
		c.Conn.Close()
		return 0, io.EOF // go-redis retries io.EOF on a new connection
	}
	return c.Conn.Write(b)
}

// Move points shards at the addresses the config center names (logical shard ->
// host:port), on-call's override; a shard it does not name returns to the master
// the sentinels elected (Elect), else to its configured address. A server's
// shards move together (they share its client), so an override that names some
// of a server's shards and not the others, or two addresses for them, is refused
// whole. It returns the shards whose address changed.
func (p *Pool) Move(overrides map[int]string) ([]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	moved, err := p.point(p.elected, overrides)
	if err == nil {
		p.onCall = overrides
	}
	return moved, err
}

// Elect points shards at the masters Redis Sentinel elected (FollowSentinels);
// on-call's overrides (Move) still win. It returns the shards whose address changed.
func (p *Pool) Elect(masters map[int]string) ([]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	moved, err := p.point(masters, p.onCall)
	if err == nil {
		p.elected = masters
	}
	return moved, err
}

// point moves each server's target to on-call's address, else the elected one,
// else the configured one; all or nothing.
func (p *Pool) point(elected, onCall map[int]string) ([]int, error) {
	want := map[*target]string{}
	for shard := range p.clients {
		t := p.targets[shard]
		addr, ok := onCall[shard]
		if !ok {
			addr, ok = elected[shard]
		}
		if !ok {
			addr = t.configured
		}
		if prev, seen := want[t]; seen && prev != addr {
			return nil, fmt.Errorf("shardpool: shards of server %s pointed at %s and %s; a server's shards move together", t.configured, prev, addr)
		}
		want[t] = addr
	}
	var moved []int
	for t, addr := range want {
		if t.moveTo(addr) {
			for shard := range p.clients {
				if p.targets[shard] == t {
					moved = append(moved, shard)
				}
			}
		}
	}
	sort.Ints(moved)
	return moved, nil
}
