package admintest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server of the test's own, with an append-only file
// synced on every write, so that a kill and restart keeps what it acknowledged
// (the fault tests kill it between the MySQL and the Redis write).
type RedisServer struct {
	t    testing.TB
	Addr string
	dir  string
	port int
	cmd  *exec.Cmd
}

// StartRedis starts a persistent redis-server on a free port; it is killed when
// the test ends.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &RedisServer{t: t, Addr: fmt.Sprintf("127.0.0.1:%d", port), dir: t.TempDir(), port: port}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Start (re)starts the server and waits until it answers.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--port", fmt.Sprint(s.port), "--bind", "127.0.0.1",
		"--dir", s.dir, "--save", "", "--appendonly", "yes", "--appendfsync", "always")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer within 10s", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills the server (SIGKILL) and waits until it is gone.
func (s *RedisServer) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Addrs is the 16-shard configuration with every shard on this server.
func (s *RedisServer) Addrs() []string {
	out := make([]string, 16)
	for i := range out {
		out[i] = s.Addr
	}
	return out
}
