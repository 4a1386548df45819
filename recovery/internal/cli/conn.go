// Package cli is bin/recovery's commands: the flags, the wiring, the exit codes.
// The work itself lives in flowsink, rebuild and verify.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/stack"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/recovery/internal/flowlag"
)

// Exit codes of the one-shot commands.
const (
	exitOK    = 0
	exitFail  = 1 // refused, failed, or (verify) drift found
	exitUsage = 2
)

// conn is the connection settings of rebuild and verify. Precedence: a flag given
// on the command line, else the running local stack's .run/stack.json (so both work
// against `make up` with no flags, whatever ports it chose), else svc.Flags'
// defaults (the local stack's standard ports).
type conn struct {
	svc.Flags
	nacos     *configcenter.NacosFlags
	stackFile string
	group     string
	log       *slog.Logger
	sentinels func(context.Context) error // follows the sentinels after open (shardpool.FollowSentinels)
}

func (c *conn) logger() *slog.Logger {
	if c.log == nil {
		return slog.Default()
	}
	return c.log
}

func (c *conn) register(fs *flag.FlagSet) {
	c.Flags.Register(fs, "", "")
	c.nacos = configcenter.RegisterNacosFlags(fs)
	promo.IPv6PrefixFlag(fs) // the rebuild recomputes the per-ip counters by it
	fs.StringVar(&c.stackFile, "stack", "", "local stack file to take --redis/--mysql/--kafka from when not given (default: .run/stack.json of the repository, if present)")
	fs.StringVar(&c.group, "group", flowlag.DefaultGroup, "consumer group of the flow sink, whose position is checked")
}

// resolve fills the flags not given from the stack file.
func (c *conn) resolve(fs *flag.FlagSet, log *slog.Logger) error {
	c.log = log
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["redis"] && given["mysql"] && given["kafka"] {
		return nil
	}
	st, err := stack.Load(c.stackFile)
	switch {
	case err != nil && c.stackFile != "":
		return err
	case err != nil:
		// No local stack here: production runs pass every flag.
		if !errors.Is(err, os.ErrNotExist) {
			log.Debug("no local stack file; using flags and defaults", "err", err.Error())
		}
		return nil
	}
	if !given["redis"] {
		c.Redis = st.Redis
	}
	if !given["redis-sentinels"] && len(st.Sentinels) > 0 {
		c.RedisSentinels, c.RedisSentinelPrefix = st.Sentinels, st.SentinelPrefix
	}
	if !given["mysql"] && st.MySQLDSN != "" {
		c.MySQL = st.MySQLDSN
	}
	if !given["kafka"] && len(st.Kafka) > 0 {
		c.Kafka = st.Kafka
	}
	if !given["switches"] && st.SwitchesFile != "" {
		c.Switches = st.SwitchesFile
	}
	return nil
}

// open connects to the shards, MySQL (applying the migrations unless
// --mysql-migrate=false) and the sink's position.
func (c *conn) open(ctx context.Context) (*shardpool.Pool, []redis.UniversalClient, *store.Store, *flowlag.Meter, error) {
	auth, err := svc.RedisAuthFromEnv()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	opts := redis.Options{DialTimeout: 2 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	auth.Apply(&opts)
	pool, err := shardpool.New(c.Redis, opts)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// Where the sentinels elected each master, then on-call's word on top.
	c.sentinels = shardpool.FollowSentinels(ctx, pool, c.RedisSentinels, c.RedisSentinelPrefix, opts, c.logger(), nil)
	if err := c.followSwitches(ctx, pool); err != nil {
		pool.Close()
		return nil, nil, nil, nil, err
	}
	shards := make([]redis.UniversalClient, len(c.Redis))
	for i := range shards {
		shards[i] = pool.Client(i)
	}
	db, err := store.OpenWith(ctx, c.MySQL, c.MySQLMigrate)
	if err != nil {
		pool.Close()
		return nil, nil, nil, nil, err
	}
	var lag *flowlag.Meter
	if len(c.Kafka) > 0 {
		kafkaAuth, err := kafkaauth.FromEnv()
		if err != nil {
			pool.Close()
			db.Close()
			return nil, nil, nil, nil, err
		}
		lag = flowlag.NewMeter(c.Kafka, kafkaAuth, flow.Topic, c.group)
	}
	return pool, shards, db, lag, nil
}

// followSwitches points the pool's shards where the config center says they are
// now (shardAddrs: a failover to a promoted replica), as the services do.
func (c *conn) followSwitches(ctx context.Context, pool *shardpool.Pool) error {
	log := c.logger()
	store, err := c.nacos.Store(c.Switches, log)
	if err != nil {
		return err
	}
	defer store.Close()
	snap, err := configcenter.ReadSwitches(ctx, store)
	if err != nil {
		return fmt.Errorf("where the shards are: %w", err)
	}
	allowed := shardpool.Allowlist(c.RedisAllow, c.Redis)
	for shard, addr := range snap.ShardAddrOverrides() {
		if !allowed(addr) {
			return fmt.Errorf("the switches point shard %d at %s, not among the servers allowed (--redis-allow): refused", shard, addr)
		}
	}
	moved, err := pool.Move(snap.ShardAddrOverrides())
	if err != nil {
		return err
	}
	for _, shard := range moved {
		log.Info("shard moved by the switches", "shard", shard, "addr", pool.Addr(shard))
	}
	return nil
}

// shardList is a repeatable --shard flag taking N or N,M,...
type shardList []int

func (s *shardList) String() string { return fmt.Sprint([]int(*s)) }

func (s *shardList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 0 || n > 15 {
			return fmt.Errorf("shard %q: want a number in 0..15", part)
		}
		*s = append(*s, n)
	}
	return nil
}

func fail(log *slog.Logger, msg string, err error) int {
	log.Error(msg, "err", err.Error())
	fmt.Fprintf(os.Stderr, "recovery: %s: %v\n", msg, err)
	return exitFail
}
