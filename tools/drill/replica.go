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

// replicaDrill loses a shard's master and puts a stale replica in its place, as a
// failover does when replication lags: a replica of the shard follows the master
// under load, is frozen while the master keeps granting, the master is killed,
// and the frozen replica is promoted and served at the shard's address. It holds
// the master's built marker but not its last takes, so selling from it would sell
// units the record already granted (the checker's oversell and record findings).
// grab-service must fence the shard (the marker names another server) until
// `recovery rebuild --missing` restores it from the record.
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
	// The shard's address serves the promoted replica's data: its server comes back
	// empty (the drill rebuilds, not stack.sh) and copies the replica whole.
	if err := d.ctl.up(ctx, "FLASHSALE_NO_REBUILD=1"); err != nil {
		out.fail("restart %s: %v", name, err)
		return
	}
	if err := copyFrom(ctx, d.shards[shard], rep); err != nil {
		out.fail("serve the promoted replica's data at %s: %v", name, err)
		return
	}
	st, err := shardmark.Read(ctx, d.shards[shard], shard)
	if err != nil || st.Built != shardmark.Moved {
		out.fail("the promoted data at %s: markers %+v (err %v), want another server's built marker", name, st, err)
	}
	d.awaitFenced(ctx, shard, fmt.Sprintf("shard %d, promoted from a stale replica,", shard), out)
	sleep(ctx, d.o.hold/2)
	t := time.Now()
	outb, err := d.recovery(ctx, "rebuild", "--missing", "--quiet")
	if err != nil {
		out.fail("bin/recovery rebuild --missing: %v: %s", err, lastLine(outb))
		return
	}
	if st, err := shardmark.Read(ctx, d.shards[shard], shard); err != nil || st.Built != shardmark.Whole {
		out.fail("after rebuild --missing shard %d is not whole: %+v (err %v)", shard, st, err)
	}
	out.note("shard %d, served from a replica frozen for %s, fenced and rebuilt by rebuild --missing in %s", shard, d.o.hold, time.Since(t).Round(100*time.Millisecond))
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

// copyFrom makes c's server a copy of the promoted replica's data, then a master
// of its own, as if the replica had been failed over to at the shard's address.
func copyFrom(ctx context.Context, c redis.UniversalClient, from *replica) error {
	_ = from.c.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err()
	// Loaded from the socket, not through a dump.rdb in the shard's directory: the
	// stack's servers keep nothing, and a later restart must come back empty.
	if err := c.ConfigSet(ctx, "repl-diskless-load", "swapdb").Err(); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(from.addr)
	if err := c.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		return err
	}
	// Whatever happens, the shard's server ends a master again: a replica left
	// behind would refuse every write of later drills.
	defer c.Do(context.WithoutCancel(ctx), "REPLICAOF", "NO", "ONE")
	// Linked means the full sync is done: the promoted replica takes no writes, so
	// the copy holds all of it.
	if err := awaitLinked(ctx, c); err != nil {
		return err
	}
	return c.Do(ctx, "REPLICAOF", "NO", "ONE").Err()
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
