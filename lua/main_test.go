package lua

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/shardpool"
)

// rdb is a client of the redis-server that TestMain starts for this package.
var rdb *redis.Client

// onShard is the logical shard the admin scripts are told rdb serves; only
// TestAdminScriptsRefuseAFencedShard raises a fence, on a shard of its own.
const onShard = 0

// now is the pinned clock of every test.
const now int64 = 1_700_000_000_000

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the lua tests need redis-server on PATH (Debian: apt-get install redis-server):", err)
		return 1
	}
	port, err := freePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: no free port:", err)
		return 1
	}
	srv := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", os.TempDir())
	srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	if err := srv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start redis-server:", err)
		return 1
	}
	defer func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	}()

	rdb = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Protocol: shardpool.Protocol, PoolSize: 64})
	defer rdb.Close()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "FAIL: redis-server did not answer PING within 10s")
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := Load(ctx, rdb); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: load scripts:", err)
		return 1
	}
	return m.Run()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// keySeq makes every promoKey call distinct, so -count=N reruns start from clean keys.
var keySeq atomic.Int64

// promoKey is a new promotion key named after the test and suffix, so tests run in parallel.
func promoKey(t *testing.T, suffix string) string {
	id := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, fmt.Sprintf("%s-%s-%d", t.Name(), suffix, keySeq.Add(1)))
	return promo.Key(id, 1)
}

// baseSpec is an active promotion running from now-1h to now+1h, no limits.
func baseSpec() AdminSpec {
	return AdminSpec{Ver: 1, Total: 10, MaxPerGrab: 5, StartMs: now - 3_600_000, EndMs: now + 3_600_000, State: "ACTIVE"}
}

func mustCreate(t *testing.T, key string, s AdminSpec) {
	code, err := Create(context.Background(), rdb, onShard, key, s)
	if err != nil || code != AdminOK {
		t.Fatalf("create %s: %v %v", key, code, err)
	}
}

func mustHash(t *testing.T, key string) HashState {
	h, ok, err := ReadHash(context.Background(), rdb, key)
	if err != nil || !ok {
		t.Fatalf("read %s: ok=%v err=%v", key, ok, err)
	}
	return h
}

// held returns field of the hash (pins or ips), -1 when the field is absent.
func held(t *testing.T, hashKey, field string) int64 {
	v, err := rdb.HGet(context.Background(), hashKey, field).Int64()
	if err == redis.Nil {
		return -1
	}
	if err != nil {
		t.Fatalf("hget %s %s: %v", hashKey, field, err)
	}
	return v
}

func ledger(t *testing.T, key, rid string) (LedgerEntry, bool) {
	e, ok, err := ReadLedger(context.Background(), rdb, key, rid)
	if err != nil {
		t.Fatalf("ledger %s %s: %v", key, rid, err)
	}
	return e, ok
}

// pendingScore returns rid's score in the pending set, -1 when absent.
func pendingScore(t *testing.T, key, rid string) int64 {
	v, err := rdb.ZScore(context.Background(), promo.PendingKey(key), rid).Result()
	if err == redis.Nil {
		return -1
	}
	if err != nil {
		t.Fatalf("zscore: %v", err)
	}
	return int64(v)
}

// grabCall is a one-item grab of num units by pin/ip at now.
func grabCall(rid, pin, ip string, items ...GrabItem) GrabCall {
	return GrabCall{NowMs: now, DeadlineMs: now + 5000, RequestID: rid, BodyHash: "h-" + rid,
		Pin: pin, IP: ip, RateFactorPermille: 1000, Items: items}
}

func mustGrab(t *testing.T, c GrabCall) GrabReply {
	r, err := Grab(context.Background(), rdb, c)
	if err != nil {
		t.Fatalf("grab %s: %v", c.RequestID, err)
	}
	return r
}
