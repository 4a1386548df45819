package shardpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/ring"
)

// MasterName is the name the sentinels monitor shard's master under.
func MasterName(prefix string, shard int) string { return prefix + strconv.Itoa(shard) }

// Sentinels asks Redis Sentinel which server is each shard's master. A failed
// master is promoted away by the sentinels (a real engine, not ours); the pool
// follows their word, and the fence then judges the promoted replica.
type Sentinels struct {
	clients []*redis.SentinelClient
	prefix  string
	last    atomic.Int32 // the sentinel that answered last, asked first
}

// NewSentinels builds a follower of the sentinels at addrs, which monitor the
// shards' masters as prefix0 .. prefix15. opts is the template of each client
// (credentials, TLS); its Addr is replaced.
func NewSentinels(addrs []string, prefix string, opts redis.Options) *Sentinels {
	s := &Sentinels{prefix: prefix}
	for _, a := range addrs {
		s.clients = append(s.clients, redis.NewSentinelClient(&redis.Options{Addr: a, Username: opts.Username,
			Password: opts.Password, TLSConfig: opts.TLSConfig, DialTimeout: 2 * time.Second,
			ReadTimeout: time.Second, WriteTimeout: time.Second, Protocol: Protocol}))
	}
	return s
}

// Masters asks the sentinels, in turn until one answers, for every shard's
// master. A shard no sentinel names is left out: it stays where it is configured.
func (s *Sentinels) Masters(ctx context.Context) (map[int]string, error) {
	var lastErr error
	first := int(s.last.Load())
	for i := range s.clients {
		at := (first + i) % len(s.clients)
		masters, err := s.ask(ctx, s.clients[at])
		if err == nil {
			s.last.Store(int32(at))
			return masters, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("no sentinel answered: %w", lastErr)
}

// ask reads every shard's master from one sentinel in one round trip.
func (s *Sentinels) ask(ctx context.Context, c *redis.SentinelClient) (map[int]string, error) {
	masters := map[int]string{}
	for shard := range ring.Shards {
		addr, err := c.GetMasterAddrByName(ctx, MasterName(s.prefix, shard)).Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue // not monitored under this name
		case err != nil:
			return nil, err
		case len(addr) == 2:
			masters[shard] = net.JoinHostPort(addr[0], addr[1])
		}
	}
	return masters, nil
}

// Close closes the sentinel clients.
func (s *Sentinels) Close() error {
	for _, c := range s.clients {
		_ = c.Close()
	}
	return nil
}

// Follow moves p's shards to the masters the sentinels name, now and every
// interval until ctx ends; onMoved (optional) learns the shards that moved. A
// round in which no sentinel answers changes nothing.
func (s *Sentinels) Follow(ctx context.Context, p *Pool, every time.Duration, log *slog.Logger, onMoved func(shards []int)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.followOnce(ctx, p, log, onMoved)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sentinels) followOnce(ctx context.Context, p *Pool, log *slog.Logger, onMoved func(shards []int)) {
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	masters, err := s.Masters(actx)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("sentinels not answering; shards stay where they are", "err", err.Error())
		}
		return
	}
	moved, err := p.Elect(masters)
	switch {
	case err != nil:
		log.Error("masters the sentinels elected not applied", "err", err.Error())
	case len(moved) > 0:
		log.Warn("shards moved to the masters the sentinels elected", "shards", moved)
		if onMoved != nil {
			onMoved(moved)
		}
	}
}

// FollowSentinels points p at the masters the sentinels at addrs elect, once now
// (so a service restarted after a failover starts on the current masters) and
// then every 250 ms for as long as the loop it returns runs. Without sentinels the
// loop only waits for its end.
func FollowSentinels(ctx context.Context, p *Pool, addrs []string, prefix string, opts redis.Options, log *slog.Logger, onMoved func(shards []int)) func(context.Context) error {
	if len(addrs) == 0 {
		return func(ctx context.Context) error { <-ctx.Done(); return nil }
	}
	s := NewSentinels(addrs, prefix, opts)
	s.followOnce(ctx, p, log, onMoved)
	return func(ctx context.Context) error {
		defer s.Close()
		s.Follow(ctx, p, 250*time.Millisecond, log, onMoved)
		return nil
	}
}
