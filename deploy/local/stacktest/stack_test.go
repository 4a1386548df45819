// Package stacktest checks `make up` against the real machine: it must leave a running
// stack alone and bring back exactly the part that died. It starts and kills processes,
// so it runs only when FLASHSALE_STACK_TEST=1 (`make test` runs it as its own step).
package stacktest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/stack"
)

const killedShard = "redis-7"

func TestMakeUpKeepsRunningPartsAndRestartsDeadOnes(t *testing.T) {
	if os.Getenv("FLASHSALE_STACK_TEST") != "1" {
		t.Skip("starts and kills local stack processes; set FLASHSALE_STACK_TEST=1 (make test does)")
	}
	root, err := stack.Root()
	if err != nil {
		t.Fatalf("find repository root: %v", err)
	}

	makeUp(t, root, "first make up")
	first := load(t)
	requireInfraPids(t, first)

	makeUp(t, root, "second make up")
	second := load(t)
	if diff := pidChanges(first.Pids, second.Pids, ""); diff != "" {
		t.Fatalf("a second `make up` must leave the running stack alone, but pids changed:\n%s", diff)
	}
	pingShards(t, second)

	old := second.Pids[killedShard]
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL %s (pid %d): %v", killedShard, old, err)
	}
	waitShardDown(t, second, killedShard)

	makeUp(t, root, "make up after killing "+killedShard)
	third := load(t)
	if have := third.Pids[killedShard]; have == 0 || have == old {
		t.Fatalf("%s: want a new pid after `make up` (old %d), have %d", killedShard, old, have)
	}
	if diff := pidChanges(second.Pids, third.Pids, killedShard); diff != "" {
		t.Fatalf("restarting %s must leave every other process alone, but pids changed:\n%s", killedShard, diff)
	}
	pingShards(t, third)
}

func makeUp(t *testing.T, root, step string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "up")
	cmd.Dir = root
	// The stack's processes write to their own logs, but do not let a stray inherited
	// descriptor keep this test waiting after make exits.
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s failed: %v\n%s", step, err, out)
	}
	t.Logf("%s: ok", step)
}

func load(t *testing.T) stack.File {
	t.Helper()
	f, err := stack.Load("")
	if err != nil {
		t.Fatalf("load stack file: %v", err)
	}
	return f
}

func requireInfraPids(t *testing.T, f stack.File) {
	t.Helper()
	for i := range f.Redis {
		if name := fmt.Sprintf("redis-%d", i); f.Pids[name] <= 0 {
			t.Fatalf("stack file: %s has no pid (%d)", name, f.Pids[name])
		}
	}
	if f.Pids["kafka"] <= 0 {
		t.Fatalf("stack file: kafka has no pid (%d)", f.Pids["kafka"])
	}
}

// pidChanges lists every component whose pid differs between want and have, except skip.
func pidChanges(want, have map[string]int, skip string) string {
	names := map[string]bool{}
	for n := range want {
		names[n] = true
	}
	for n := range have {
		names[n] = true
	}
	var lines []string
	for n := range names {
		if n == skip {
			continue
		}
		w, wok := want[n]
		h, hok := have[n]
		if w != h || wok != hok {
			lines = append(lines, fmt.Sprintf("  %s: was %d, now %d", n, w, h))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// pingShards checks every shard answers PING and is served by the pid the stack file names.
func pingShards(t *testing.T, f stack.File) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, addr := range f.Redis {
		name := fmt.Sprintf("redis-%d", i)
		c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second, MaxRetries: -1})
		pong, err := c.Ping(ctx).Result()
		if err != nil || pong != "PONG" {
			c.Close()
			t.Fatalf("%s at %s: PING answered %q, %v", name, addr, pong, err)
		}
		info, err := c.InfoMap(ctx, "server").Result()
		c.Close()
		if err != nil {
			t.Fatalf("%s at %s: INFO server: %v", name, addr, err)
		}
		if have, want := info["Server"]["process_id"], fmt.Sprint(f.Pids[name]); have != want {
			t.Fatalf("%s at %s: served by pid %s, stack file says %s", name, addr, have, want)
		}
	}
}

// waitShardDown waits until the killed shard stops accepting connections, so the next
// `make up` sees it dead.
func waitShardDown(t *testing.T, f stack.File, name string) {
	t.Helper()
	var i int
	if _, err := fmt.Sscanf(name, "redis-%d", &i); err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", f.Redis[i], time.Second)
		if err != nil {
			return
		}
		conn.Close()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s at %s still accepts connections 10 s after SIGKILL", name, f.Redis[i])
}
