package rebuild

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
)

// historyFactor is how much more history than live rows the measurement adds.
const historyFactor = 10

// The record kept in bounds (issue 34, part 4): a shard's rebuild takes no longer
// with ten times its history archived than with none. One live promotion of
// REBUILD_HISTORY_ROWS flow rows (2,000 unless set) on a shard; its rebuild, from
// the record's list of live promotions to the built marker, as Run does it under
// the fence, is timed into an empty redis-server (median of historyRuns). Then ten
// promotions on the same shard, ended 40 days ago, with as many rows each, are
// written, and the rebuild is timed with them left in grab_flow (the record without
// the archive, for contrast) and again after store.Archive moved them out. Printed,
// never asserted: the times and their ratios to the first, in this one process,
// and the archive's rate. Asserted: with the history archived, the rebuild restores
// exactly what it did without history.
//
//	REBUILD_HISTORY_ROWS=20000 go test -run RebuildShardWithArchivedHistory -v -count 1 ./recovery/internal/rebuild/
//
// Skipped with -short.
func TestRebuildShardWithArchivedHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement: writes eleven times REBUILD_HISTORY_ROWS rows")
	}
	rows := 2000
	if v, err := strconv.Atoi(os.Getenv("REBUILD_HISTORY_ROWS")); err == nil && v > 0 {
		rows = v
	}
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Now().UTC()
	suffix := testenv.Suffix()
	live := idOnShard("live-"+suffix, -1)
	shard := ring.Default.Shard(promo.Key(live, 1))
	seedFlows(t, db, live, rows, now.Add(-time.Hour), now.Add(time.Hour))

	srv := testenv.StartRedis(t, testenv.Volatile)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: shardpool.Protocol})
	t.Cleanup(func() { c.Close() })
	m := historyMeter{db: db, c: c, shard: shard,
		d: Deps{Record: db.Rebuild, Flows: db.Flows, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}

	none, want := m.measure(t)

	var old []store.ID
	ended := now.Add(-40 * 24 * time.Hour)
	for i := range historyFactor {
		id := idOnShard("old-"+strconv.Itoa(i)+"-"+suffix, shard)
		seedFlows(t, db, id, rows, ended.Add(-time.Hour), ended)
		old = append(old, store.ID{PromoID: id, Type: 1})
	}
	unarchived, all := m.measure(t)
	if all.Promotions != 1+historyFactor {
		t.Fatalf("with the history in grab_flow the rebuild restored %d promotions, want %d", all.Promotions, 1+historyFactor)
	}

	moved, took := archiveAll(t, db.Archive, now.Add(-30*24*time.Hour), old)
	if moved != historyFactor*rows {
		t.Fatalf("the archive moved %d rows, want %d", moved, historyFactor*rows)
	}
	archived, got := m.measure(t)
	if got.Promotions != want.Promotions || got.Ledger != want.Ledger || got.Pins != want.Pins || got.IPs != want.IPs || got.Index != want.Index {
		t.Fatalf("with the history archived the rebuild restored %+v, without history %+v", got, want)
	}

	t.Logf("rebuild of shard %d, %d live rows, median of %d:", shard, rows, historyRuns)
	t.Logf("  no history                        %8.1f ms", ms(none))
	t.Logf("  %2dx history left in grab_flow     %8.1f ms  ratio %.2f", historyFactor, ms(unarchived), float64(unarchived)/float64(none))
	t.Logf("  %2dx history archived              %8.1f ms  ratio %.2f", historyFactor, ms(archived), float64(archived)/float64(none))
	t.Logf("archive: %d rows of %d promotions moved in %.1f ms (%.0f rows/s)", moved, historyFactor, ms(took), float64(moved)/took.Seconds())
}

// historyRuns is how many rebuilds each phase times; the median is kept.
const historyRuns = 5

// historyMeter times the whole rebuild of one shard into one redis-server.
type historyMeter struct {
	db    *store.Store
	c     *redis.Client
	shard int
	d     Deps
}

// measure rebuilds the shard historyRuns times, each into an emptied server, as
// Run's rebuildShards does once the fence is up (the record's live promotions,
// those of the shard, the shard restored whole), and returns the median time and
// the last run's summary.
func (m historyMeter) measure(t *testing.T) (time.Duration, ShardSummary) {
	t.Helper()
	ctx := context.Background()
	clients := map[int]redis.UniversalClient{m.shard: m.c}
	var took []time.Duration
	var ss ShardSummary
	for range historyRuns {
		if err := m.c.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		live, err := m.d.Record.LivePromotions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ss, err = rebuildShard(ctx, m.d, Defaults(), m.shard, m.c, pick(live, nil, clients)[m.shard], nil); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[len(took)/2], ss
}

// archiveAll archives the promotions ended before cutoff, which must be old, and
// moves their rows as recovery archive does, in batches of 2,000; it returns the
// rows moved and the time taken.
func archiveAll(t *testing.T, a *store.Archive, cutoff time.Time, old []store.ID) (int, time.Duration) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	if n, err := a.MarkEnded(ctx, cutoff); err != nil || n != int64(len(old)) {
		t.Fatalf("mark: %d %v, want %d", n, err, len(old))
	}
	moved := 0
	for _, id := range old {
		for {
			n, err := a.MoveFlows(ctx, id, 2000)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			moved += n
		}
	}
	return moved, time.Since(start)
}

// idOnShard is prefix, numbered until its promotion lives on shard (any: -1).
func idOnShard(prefix string, shard int) string {
	for n := 0; ; n++ {
		id := prefix + "-" + strconv.Itoa(n)
		if shard < 0 || ring.Default.Shard(promo.Key(id, 1)) == shard {
			return id
		}
	}
}

// seedFlows writes a committed promotion selling from start to end and rows GRAB
// rows of one unit each, occurred a minute after start, as the flow sink writes
// them (body hash and request index shard included): a pin every 10 rows and an
// ip every 16, as BenchmarkRebuildShard's. remaining counts them granted.
func seedFlows(t *testing.T, db *store.Store, id string, rows int, start, end time.Time) {
	t.Helper()
	spec := promo.Spec{PromoID: id, Type: 1, Title: "history", Total: 2 * int64(rows), MaxPerGrab: 1, StartAt: start, EndAt: end}
	seedGrabs(t, db, spec, rows, start.Add(-time.Hour), grabRows{at: start.Add(time.Minute), pin: id + "-p",
		event: func(rid string, _ int) string { return "e-" + rid }})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
