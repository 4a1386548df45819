package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a redis-sentinel of the test's own (Debian's redis-sentinel, which
// make test installs), watching the masters the test names.
type Sentinel struct {
	Addr string
	cmd  *exec.Cmd
}

// StartSentinel starts a sentinel monitoring masters (name -> address) with
// quorum 1 and a 500 ms down-after, so a test's failover takes about a second; it
// is killed when the test ends.
func StartSentinel(t testing.TB, masters map[string]string) *Sentinel {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	conf := []string{"bind 127.0.0.1", "port " + strconv.Itoa(port), "daemonize no", "dir " + dir}
	for name, addr := range masters {
		host, p, _ := net.SplitHostPort(addr)
		conf = append(conf, fmt.Sprintf("sentinel monitor %s %s %s 1", name, host, p),
			fmt.Sprintf("sentinel down-after-milliseconds %s 500", name),
			fmt.Sprintf("sentinel failover-timeout %s 5000", name))
	}
	path := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Sentinel{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: exec.Command("redis-sentinel", path)}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start redis-sentinel: %v (is redis-sentinel installed? make test installs it)", err)
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		_ = s.cmd.Wait()
	})
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-sentinel on %s did not answer within 10s", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

// ReplicaOf makes r a replica of master and waits until its full sync is done (r
// then holds every write master took before). WAIT counts only replicas online,
// past their full sync, whose snapshot holds every write before REPLICAOF.
func (r *RedisServer) ReplicaOf(master *RedisServer) {
	r.t.Helper()
	ctx := context.Background()
	m, c := master.Client(), r.Client()
	m.ConfigSet(ctx, "repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(master.Addr)
	if err := c.ReplicaOf(ctx, host, port).Err(); err != nil {
		r.t.Fatal(err)
	}
	if n, err := m.Do(ctx, "WAIT", 1, 20_000).Int(); err != nil || n != 1 {
		r.t.Fatalf("the replica did not catch up with %s within 20 s (%d acknowledged, %v)", master.Addr, n, err)
	}
}
