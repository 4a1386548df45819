package rebuild

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
)

// BenchmarkRebuildShard rebuilds, whole, the shard of one promotion whose flow log
// holds REBUILD_BENCH_ROWS GRAB rows (100,000 unless set) into a redis-server of its
// own, as `bin/bench`'s scenario 6 does with a million: the promotion, its pins,
// ips and ledger, and the request index entries living on the shard. Against the
// stack's MariaDB, in a throwaway database:
//
//	go test -run '^$' -bench RebuildShard -count 6 ./recovery/internal/rebuild/
//
// Beside the wall time, the CPU it cost per row in this process (go-µs/row) and in
// the redis-server's main thread (redis-µs/row): on a machine whose cores are
// shared, those bound the rate and move far less than it. Scan is MySQL's raw rate
// over the same rows, the scenario's baseline.
func BenchmarkRebuildShard(b *testing.B) {
	rows := 100_000
	if v, err := strconv.Atoi(os.Getenv("REBUILD_BENCH_ROWS")); err == nil && v > 0 {
		rows = v
	}
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.MySQLDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	p := seedSpeedPromotion(b, db, "speed-"+testenv.Suffix(), rows)
	srv := testenv.StartRedis(b, testenv.Volatile)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: shardpool.Protocol})
	defer c.Close()
	ts := targets(p)
	d := Deps{Record: db.Rebuild, Flows: db.Flows, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}

	b.Run("rebuild", func(b *testing.B) {
		goBefore, redisBefore := processCPU(), redisCPU(b, c)
		for b.Loop() {
			ss, err := rebuildShard(ctx, d, Defaults(), ts[0].shard(), c, ts, nil)
			if err != nil {
				b.Fatal(err)
			}
			if ss.Ledger != rows {
				b.Fatalf("ledger %d, want %d", ss.Ledger, rows)
			}
		}
		n := float64(rows) * float64(b.N)
		b.ReportMetric(n/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64((processCPU()-goBefore).Microseconds())/n, "go-µs/row")
		b.ReportMetric(float64((redisCPU(b, c)-redisBefore).Microseconds())/n, "redis-µs/row")
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			n := 0
			if err := db.Rebuild.EachFlow(ctx, p.ID(), func(store.FlowRow) error { n++; return nil }); err != nil || n != rows {
				b.Fatalf("scanned %d of %d rows: %v", n, rows, err)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// redisCPU is the CPU time the server's main thread has used.
func redisCPU(b *testing.B, c *redis.Client) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_user_main_thread" || name == "used_cpu_sys_main_thread" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// seedSpeedPromotion writes a live promotion and rows GRAB rows of one unit each,
// as the flow sink would (body hash and index shard included), in multi-row
// INSERTs: a pin every 10 rows and an ip every 16, as scenario 6's million rows
// have 100,000 pins and 62,500 ips.
func seedSpeedPromotion(b *testing.B, db *store.Store, id string, rows int) store.Promotion {
	now := time.Now().UTC()
	spec := promo.Spec{PromoID: id, Type: 1, Title: "rebuild speed", Total: 2 * int64(rows), MaxPerGrab: 1,
		StartAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour)}
	ev := make([]byte, 8)
	return seedGrabs(b, db, spec, rows, now, grabRows{at: now.Add(-time.Minute), pin: "p",
		event: func(_ string, k int) string {
			_, _ = rand.Read(ev)
			return hex.EncodeToString(ev) + strconv.Itoa(k)
		}})
}
