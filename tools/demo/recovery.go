package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/stack"
	"github.com/flashsale/platform/lua"
)

// shardView is what the demo shows of a promotion before and after its shard is lost.
type shardView struct {
	found             bool
	remaining         int64
	pins, ips, ledger int64
}

func viewOf(ctx context.Context, c *redis.Client, key string) shardView {
	h, found, err := lua.ReadHash(ctx, c, key)
	if err != nil || !found {
		return shardView{}
	}
	return shardView{found: true, remaining: h.Remaining,
		pins:   c.HLen(ctx, promo.PinsKey(key)).Val(),
		ips:    c.HLen(ctx, promo.IPsKey(key)).Val(),
		ledger: c.HLen(ctx, promo.LedgerKey(key)).Val()}
}

func (v shardView) String() string {
	if !v.found {
		return "promotion hash MISSING (the shard is empty)"
	}
	return fmt.Sprintf("remaining %d, pins holding %d, ips holding %d, ledger entries %d", v.remaining, v.pins, v.ips, v.ledger)
}

// loseAndRebuild kills the shard holding key, brings it back empty, and rebuilds it
// from MySQL with bin/recovery, printing the promotion before, between and after.
func loseAndRebuild(ctx context.Context, st stack.File, stackFile string, shard int, c *redis.Client, key string) error {
	root, err := stack.Root()
	if err != nil {
		return err
	}
	if stackFile == "" {
		stackFile = filepath.Join(root, ".run", "stack.json")
	}
	before := viewOf(ctx, c, key)
	fmt.Printf("before:            %s\n", before)

	pid := st.Pids["redis-"+strconv.Itoa(shard)]
	if pid <= 0 {
		return fmt.Errorf("no pid for redis-%d in the stack file", shard)
	}
	fmt.Printf("SIGKILL redis-%d (pid %d) and start it again, empty\n", shard, pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill redis-%d: %w", shard, err)
	}
	for syscall.Kill(pid, 0) == nil {
		time.Sleep(50 * time.Millisecond)
	}
	up := exec.CommandContext(ctx, filepath.Join(root, "deploy/local/stack.sh"), "up")
	up.Env = append(os.Environ(), "FLASHSALE_NO_REBUILD=1")
	if out, err := up.CombinedOutput(); err != nil {
		return fmt.Errorf("restart the shard: %w\n%s", err, out)
	}
	fmt.Printf("after the restart: %s\n", viewOf(ctx, c, key))

	fmt.Printf("\n$ bin/recovery rebuild --shard %d\n", shard)
	rebuild := exec.CommandContext(ctx, filepath.Join(root, "bin/recovery"), "rebuild", "--shard", strconv.Itoa(shard), "--stack", stackFile)
	rebuild.Stdout, rebuild.Stderr = os.Stdout, os.Stderr
	if err := rebuild.Run(); err != nil {
		return fmt.Errorf("rebuild shard %d: %w", shard, err)
	}
	after := viewOf(ctx, c, key)
	fmt.Printf("after the rebuild: %s\n", after)
	if after != before {
		return fmt.Errorf("the rebuilt shard differs from the lost one")
	}
	fmt.Println("PASS  5 recovery is exact        the rebuilt shard holds what the lost one held")
	return nil
}
