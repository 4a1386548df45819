package recoverytest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
)

// FreePort asks the kernel for a free TCP port on 127.0.0.1.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Redis is a redis-server of the test's own, without persistence (a killed one
// comes back empty, as a lost master would), so the test may kill it freely.
type Redis = testenv.RedisServer

// StartRedis starts one; it is killed when the test ends.
func StartRedis(t testing.TB) *Redis { return testenv.StartRedis(t, testenv.Volatile) }

// Shards returns one client per logical shard: the local stack's servers, with the
// shards in own served by the test's servers instead. Closed when the test ends.
func Shards(t testing.TB, own map[int]string) []redis.UniversalClient {
	t.Helper()
	addrs := append([]string(nil), testenv.Stack(t).Redis...)
	for s, a := range own {
		addrs[s] = a
	}
	out := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, Protocol: shardpool.Protocol, DialTimeout: time.Second, ReadTimeout: 5 * time.Second, MaxRetries: 1})
		t.Cleanup(func() { c.Close() })
		out[i] = c
	}
	return out
}

// Kafka starts an in-process Kafka cluster with the flow and dead-letter topics.
func Kafka(t testing.TB) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(16, flow.Topic), kfake.SeedTopics(1, "promo-grab-flow-dlq"))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// MariaDB is a MariaDB server of the test's own, so the test may stop it: the
// machine's server is shared by every test.
type MariaDB struct {
	t    testing.TB
	DSN  string
	dir  string
	port int
	cmd  *exec.Cmd
}

// StartMariaDB initialises a data directory and starts mariadbd on a free port,
// without grant tables (it listens on 127.0.0.1 only). It is killed when the test ends.
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	for _, bin := range []string{"mariadb-install-db", "mariadbd"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, err2 := os.Stat("/usr/sbin/" + bin); err2 != nil {
				t.Skipf("%s not installed: %v", bin, err)
			}
		}
	}
	m := &MariaDB{t: t, dir: t.TempDir(), port: FreePort(t)}
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(m.dir, "data"),
		"--user=root", "--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m.DSN = fmt.Sprintf("root@tcp(127.0.0.1:%d)/flowsink_test?parseTime=true&timeout=2s", m.port)
	m.start()
	t.Cleanup(m.kill)
	return m
}

func (m *MariaDB) start() {
	m.t.Helper()
	mariadbd := "mariadbd"
	if _, err := exec.LookPath(mariadbd); err != nil {
		mariadbd = "/usr/sbin/mariadbd"
	}
	m.cmd = exec.Command(mariadbd, "--no-defaults", "--datadir="+filepath.Join(m.dir, "data"),
		"--port="+strconv.Itoa(m.port), "--bind-address=127.0.0.1", "--socket="+filepath.Join(m.dir, "sock"),
		"--user=root", "--skip-grant-tables", "--skip-log-bin", "--innodb-buffer-pool-size=32M",
		"--pid-file="+filepath.Join(m.dir, "pid"))
	if err := m.cmd.Start(); err != nil {
		m.t.Fatalf("start mariadbd: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(m.port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("mariadbd did not listen within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop freezes the server (SIGSTOP): connections hang rather than fail, the harder
// case for a client. Resume thaws it.
func (m *MariaDB) Stop()   { _ = m.cmd.Process.Signal(syscall.SIGSTOP) }
func (m *MariaDB) Resume() { _ = m.cmd.Process.Signal(syscall.SIGCONT) }

func (m *MariaDB) kill() {
	if m.cmd != nil && m.cmd.Process != nil {
		_ = m.cmd.Process.Signal(syscall.SIGCONT)
		_ = m.cmd.Process.Signal(syscall.SIGKILL)
		_ = m.cmd.Wait()
	}
}

// OpenStore opens the record in a throwaway database of its own (testenv.MySQLDSN),
// closed when the test ends, after the sinks the test started have stopped.
func OpenStore(t testing.TB) *store.Store {
	t.Helper()
	db, err := store.Open(context.Background(), testenv.MySQLDSN(t))
	if err != nil {
		t.Fatalf("open the record: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
