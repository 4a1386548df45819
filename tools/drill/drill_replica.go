package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/shardmark"
)

// replicaDrill fails a shard over to a stale replica the way on-call does (one
// configctl command): the promoted replica lacks the master's last takes, so
// grab-service must fence the shard until `recovery rebuild --missing` restores it
// there; then the shard returns to its own server, back empty, and is rebuilt
// again (docs/design.md, "Drills and checker").
func replicaDrill(ctx context.Context, d *drillEnv, rd *round, out *outcome) {
	shard := d.o.redisShard
	name := fmt.Sprintf("redis-%d", shard)
	rep, err := startReplica(ctx, d.ctl.st.Redis[shard], d.o.root)
	if err != nil {
		out.fail("start a replica of %s: %v", name, err)
		return
	}
	defer rep.stop()
	if err := rep.caughtUp(ctx, d.shards[shard]); err != nil {
		out.fail("replica of %s: %v", name, err)
		return
	}
	sleep(ctx, d.o.hold/2)
	// Frozen: the master goes on granting what the replica will never receive.
	if err := rep.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		out.fail("freeze the replica: %v", err)
		return
	}
	sleep(ctx, d.o.hold)
	if !d.killHard(name, out) {
		return
	}
	_ = rep.cmd.Process.Signal(syscall.SIGCONT)
	if err := rep.c.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		out.fail("promote the replica: %v", err)
		return
	}
	what := fmt.Sprintf("shard %d, moved to a replica promoted stale", shard)
	if !d.moveShard(ctx, shard, rep.addr, what, rep.c, out) {
		return
	}
	sleep(ctx, d.o.hold/2) // selling from the promoted replica
	// Back to the shard's own server, which comes back empty (the drill rebuilds, not stack.sh).
	if err := d.ctl.up(ctx, "FLASHSALE_NO_REBUILD=1"); err != nil {
		out.fail("restart %s: %v", name, err)
		return
	}
	d.moveShard(ctx, shard, "-", fmt.Sprintf("shard %d, moved back to its own server, empty,", shard), d.shards[shard], out)
}

// moveShard points shard at addr ("-": its flags' address) with the runbook's one
// configctl command, checks grab-service fences it, rebuilds it on the server it
// now names (c) with `recovery rebuild --missing`, and checks it whole there.
func (d *drillEnv) moveShard(ctx context.Context, shard int, addr, what string, c redis.UniversalClient, out *outcome) bool {
	cmd := d.ctl.st.Configctl(ctx, d.o.root, "--reason", "drill: "+what, "set", fmt.Sprintf("shardAddrs.%d", shard), addr)
	if outb, err := cmd.CombinedOutput(); err != nil {
		out.fail("configctl set shardAddrs.%d %s: %v: %s", shard, addr, err, outb)
		return false
	}
	t := time.Now()
	d.awaitFenced(ctx, shard, what, out)
	fenced := time.Since(t)
	if fenced > applyWithin+200*time.Millisecond { // the probe's own period and the answer's time
		out.fail("%s: grab-service fenced it %s after the command (contract: within 1 s)", what, fenced.Round(10*time.Millisecond))
	}
	sleep(ctx, d.o.hold/2)
	outb, err := d.recovery(ctx, "rebuild", "--missing", "--quiet")
	if err != nil {
		out.fail("bin/recovery rebuild --missing: %v: %s", err, lastLine(outb))
		return false
	}
	if st, err := shardmark.Read(ctx, c, shard); err != nil || st.Built != shardmark.Whole {
		out.fail("after rebuild --missing shard %d is not whole where the switches point it: %+v (err %v)", shard, st, err)
		return false
	}
	out.note("%s by one configctl command: fenced within %s, rebuilt and serving %s after the command",
		what, fenced.Round(100*time.Millisecond), time.Since(t).Round(100*time.Millisecond))
	return true
}

// replica is a redis-server of the drill's own following a shard's master.
type replica struct {
	cmd  *exec.Cmd
	addr string
	c    *redis.Client
	dir  string
}

func startReplica(ctx context.Context, master, root string) (*replica, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp(filepath.Join(root, ".run"), "drill-replica-")
	if err != nil {
		return nil, err
	}
	host, mport, _ := net.SplitHostPort(master)
	r := &replica{addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir}
	r.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", dir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--logfile", "", "--replicaof", host, mport, "--repl-diskless-sync-delay", "0")
	if err := r.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r.c = redis.NewClient(&redis.Options{Addr: r.addr})
	return r, nil
}

// caughtUp waits until the replica is linked, its full sync done; it then follows
// master's stream (the drill lets it run a while before freezing it).
func (r *replica) caughtUp(ctx context.Context, master redis.UniversalClient) error {
	_ = master.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err()
	return awaitLinked(ctx, r.c)
}

func (r *replica) stop() {
	_ = r.cmd.Process.Signal(syscall.SIGCONT)
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	_ = r.c.Close()
	_ = os.RemoveAll(r.dir)
}

// awaitLinked waits up to 30 s until c's server is a replica whose link to its
// master is up and whose full sync is done.
func awaitLinked(ctx context.Context, c redis.UniversalClient) error {
	for deadline := time.Now().Add(30 * time.Second); ; sleep(ctx, 50*time.Millisecond) {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0") {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not linked to its master with its full sync done within 30 s (%v)", err)
		}
	}
}
