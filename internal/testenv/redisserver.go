package testenv

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardpool"
)

// RedisServer is a redis-server of the test's own, for tests that kill, restart or
// mark a server, which the local stack's shared servers must never be.
type RedisServer struct {
	t    testing.TB
	Addr string
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

// Durability says what a killed server keeps.
type Durability bool

const (
	// Volatile keeps nothing: a killed server comes back empty, as a lost master would.
	Volatile Durability = false
	// Durable syncs an append-only file on every write, so a kill and restart keeps
	// everything the server acknowledged.
	Durable Durability = true
)

// StartRedis starts a server on a free port; it is killed when the test ends.
func StartRedis(t testing.TB, d Durability) *RedisServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r := &RedisServer{t: t, port: port, dir: t.TempDir(), Addr: "127.0.0.1:" + strconv.Itoa(port),
		args: []string{"--save", "", "--appendonly", "no"}}
	if d == Durable {
		r.args = []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always"}
	}
	r.Start()
	t.Cleanup(r.Kill)
	return r
}

// Start (re)starts the server on its port and waits until it answers PING.
func (r *RedisServer) Start() {
	r.t.Helper()
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(r.port), "--dir", r.dir,
		"--daemonize", "no", "--logfile", ""}, r.args...)
	r.cmd = exec.Command("redis-server", args...)
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v (is redis-server installed? make test installs it)", err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			r.t.Fatalf("redis-server on %s did not answer within 10s", r.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill SIGKILLs the server, as a crashed master, and waits until it is gone.
func (r *RedisServer) Kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	_ = r.cmd.Wait()
	r.cmd = nil
}

// Client is a client of the server, closed when the test ends.
func (r *RedisServer) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.Addr, Protocol: shardpool.Protocol})
	r.t.Cleanup(func() { c.Close() })
	return c
}

// Addrs is the 16-shard configuration with every shard on this server.
func (r *RedisServer) Addrs() []string {
	out := make([]string, 16)
	for i := range out {
		out[i] = r.Addr
	}
	return out
}

// FailOverFrom makes r a replica of master, waits until its full sync is done (it
// then holds every write master took before), then promotes r (REPLICAOF NO ONE), as
// a failover would: r keeps master's data, and whatever master writes later is not r's.
func (r *RedisServer) FailOverFrom(master *RedisServer) {
	r.t.Helper()
	r.ReplicaOf(master)
	if err := r.Client().ReplicaOf(context.Background(), "NO", "ONE").Err(); err != nil {
		r.t.Fatal(err)
	}
}

// OneServer is c as every logical shard: the 16-shard client list of a test whose
// shards all live on one server of its own.
func OneServer(c redis.UniversalClient) []redis.UniversalClient {
	shards := make([]redis.UniversalClient, ring.Shards)
	for i := range shards {
		shards[i] = c
	}
	return shards
}

// CommandCalls reads INFO commandstats of c's server: command -> calls, the
// statistics commands themselves (config, info) aside.
func CommandCalls(t testing.TB, c redis.UniversalClient) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		if name == "config|resetstat" || name == "config" || name == "info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		out[name] = n
	}
	return out
}
