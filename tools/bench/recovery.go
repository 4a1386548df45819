package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
)

// recovery is scenario 6: `recovery rebuild` of one promotion's shard from a flow log
// of recoveryRows rows, against MySQL's raw scan rate of the same table. Both read
// a database of the benchmark's own and the rebuild writes to a redis-server of its
// own, so the running stack is not touched.
func (b *bench) recovery(ctx context.Context) error {
	if why := rebuildUsable(ctx, b.recoveryBin); why != "" {
		fmt.Fprintln(os.Stderr, "recovery: not available ("+why+")")
		b.res.add(ratioRow{N: 6, Scenario: "recovery rebuild", Target: 0.5, Missing: "recovery: not available (" + why + ")"})
		return nil
	}
	scratch, err := openScratch(ctx, b.st.MySQLDSN, "bench_"+b.id+"_rec")
	if err != nil {
		return err
	}
	defer scratch.drop()
	rec, err := store.Open(ctx, scratch.DSN) // applies the migrations: the real schema
	if err != nil {
		return err
	}
	defer rec.Close()
	id := b.id + "-rec"
	total := int64(b.recoveryRows) * 2
	if err := seedPromotion(ctx, rec, id, total, int64(b.recoveryRows)); err != nil {
		return err
	}
	if err := seedFlows(ctx, scratch, id, b.recoveryRows); err != nil {
		return err
	}

	addr, stopRedis, err := startRedis(ctx)
	if err != nil {
		return err
	}
	defer stopRedis()
	shard := shardOf(id)
	// Both are timed rounds times, taking turns, and the medians compared.
	var scans, rebuilds []time.Duration
	scanned := 0
	for round := 1; round <= rounds; round++ {
		var scan time.Duration
		if scanned, scan, err = rawScan(ctx, scratch); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "   round %d/%d: raw scan of %d rows in %s; rebuilding shard %d into a redis-server of its own at %s ...\n",
			round, rounds, scanned, scan.Round(time.Millisecond), shard, addr)
		rebuilt, out, err := runRebuild(ctx, b.recoveryBin, shard, addr, scratch.DSN)
		if err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
		fmt.Fprintf(os.Stderr, "   round %d/%d: rebuild in %s\n", round, rounds, rebuilt.Round(time.Millisecond))
		scans, rebuilds = append(scans, scan), append(rebuilds, rebuilt)
	}
	scan, rebuilt := median(scans), median(rebuilds)
	check := checkRebuilt(ctx, addr, id, shard, total, b.recoveryRows)
	rows := float64(b.recoveryRows)
	b.res.TargetRuns.Rebuild = &rebuildRates{Rebuild: rows / rebuilt.Seconds(), Scan: float64(scanned) / scan.Seconds()}
	b.res.add(ratioRow{N: 6, Scenario: fmt.Sprintf("recovery rebuild, %d flow rows", b.recoveryRows),
		Ours: rows / rebuilt.Seconds(), OursUnit: fmt.Sprintf("rows/s by bin/recovery rebuild (wall, process start included; median of %d)", rounds),
		Base: float64(scanned) / scan.Seconds(), BaseUnit: fmt.Sprintf("rows/s of a raw SELECT over grab_flow (median of %d)", rounds), Target: 0.5, Detail: check})
	if !strings.HasPrefix(check, "exact") {
		b.res.Invariants = append(b.res.Invariants, invariantRow{Name: "5 recovery is exact", Promotions: 1, Failures: []string{check}})
	} else {
		b.res.Invariants = append(b.res.Invariants, invariantRow{Name: "5 recovery is exact", Pass: true, Promotions: 1})
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// rebuildUsable says why the rebuild cannot be measured, or "" when it can: the
// command must exist and take the flags that point it at a throwaway database and Redis.
func rebuildUsable(ctx context.Context, bin string) string {
	if _, err := os.Stat(bin); err != nil {
		return bin + " is not built"
	}
	out, _ := exec.CommandContext(ctx, bin, "rebuild", "--help").CombinedOutput()
	for _, f := range []string{"-shard", "-redis", "-mysql", "-kafka", "-force", "-settle", "-quiet"} {
		if !strings.Contains(string(out), f) {
			return bin + " rebuild has no " + f + " flag"
		}
	}
	return ""
}

// runRebuild runs the command and times it, process start included. No Kafka is
// given, so the flow sink's catch-up cannot be asked and --force rebuilds from what
// MySQL holds (all there is: the rows were written straight to it).
func runRebuild(ctx context.Context, bin string, shard int, redisAddr, dsn string) (time.Duration, string, error) {
	addrs := strings.TrimSuffix(strings.Repeat(redisAddr+",", 16), ",")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "rebuild", "--shard", fmt.Sprint(shard), "--redis", addrs, "--mysql", dsn,
		"--kafka=", "--force", "--settle", "0s", "--quiet")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		return elapsed, out.String(), fmt.Errorf("%s rebuild: %w", bin, err)
	}
	return elapsed, out.String(), nil
}

// checkRebuilt compares the rebuilt shard with what was seeded: the promotion, and
// the request index entries of the seeded grabs whose entry lives on the shard.
func checkRebuilt(ctx context.Context, addr, id string, shard int, total int64, seeded int) string {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	key := promo.Key(id, 1)
	rows := int64(seeded)
	remaining, err1 := c.HGet(ctx, key, "remaining").Int64()
	ledger, err2 := c.HLen(ctx, promo.LedgerKey(key)).Result()
	pins, err3 := c.HLen(ctx, promo.PinsKey(key)).Result()
	index, err4 := countKeys(ctx, c, promo.RequestIndexKey("*"))
	if err := firstError(err1, err2, err3, err4); err != nil {
		return "rebuilt promotion unreadable: " + err.Error()
	}
	wantPins := min(rows, pinPool)
	var wantIndex int64
	for k := range seeded {
		if ring.Default.Shard(promo.RequestIndexKey(seedRequestID(id, k))) == shard {
			wantIndex++
		}
	}
	verdict := "exact"
	if remaining != total-rows || ledger != rows || pins != wantPins || index != wantIndex {
		verdict = "MISMATCH"
	}
	return fmt.Sprintf("%s: remaining %d (want %d), ledger %d (want %d), pins %d (want %d), request index entries %d (want %d)",
		verdict, remaining, total-rows, ledger, rows, pins, wantPins, index, wantIndex)
}

// countKeys counts the keys matching pattern.
func countKeys(ctx context.Context, c *redis.Client, pattern string) (int64, error) {
	var n int64
	it := c.Scan(ctx, 0, pattern, 10_000).Iterator()
	for it.Next(ctx) {
		n++
	}
	return n, it.Err()
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// rawScan reads every row of grab_flow with the columns a rebuild needs, as fast
// as the driver can stream them: MySQL's own rate on this table.
func rawScan(ctx context.Context, s *scratchDB) (int, time.Duration, error) {
	start := time.Now()
	rows, err := s.DB.QueryContext(ctx, `SELECT request_id, kind, pin, ip, promo_id, promo_type, num, body_hash FROM grab_flow`)
	if err != nil {
		return 0, 0, fmt.Errorf("raw scan: %w", err)
	}
	defer rows.Close()
	n := 0
	var cols [8]sql.RawBytes
	dest := make([]any, len(cols))
	for i := range cols {
		dest[i] = &cols[i]
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return n, 0, fmt.Errorf("raw scan: %w", err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, 0, fmt.Errorf("raw scan: %w", err)
	}
	return n, time.Since(start), nil
}
