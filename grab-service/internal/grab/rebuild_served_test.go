package grab

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
)

// On-call reads bin/recovery rebuild's exit as "sales are back": a grab made the
// moment it exits must be served, not answered UNAVAILABLE "shard N is being
// rebuilt". The real binary rebuilds a lost shard of a server of the test's own
// while this instance's fence polls it once a second (200 ms in production), so
// without the rebuild's wait for the instances' serving reports nearly every run
// would grab before the fence noticed.
func TestAGrabRightAfterARebuildExitsIsServed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds bin/recovery")
	}
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	server := testenv.StartRedis(t, testenv.Volatile)
	shards := testenv.OneServer(server.Client())
	dsn := testenv.MySQLDSN(t)
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// A promotion the record holds and the server lost (it never had it).
	const lost = 9
	id := idOnShard(lost)
	now := time.Now()
	spec := promo.Spec{PromoID: id, Type: 1, Title: "rebuilt", Total: 10, MaxPerGrab: 1,
		StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour)}
	if err := db.Promotions.Insert(ctx, store.NewPromotion(spec, promo.Active, now)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Promotions.Promote(ctx, store.ID{PromoID: id, Type: 1}, 1, now); err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	fence := NewFence(shards, db.Keys.PromotionKeys, prometheus.NewRegistry(), log)
	go func() { _ = fence.Run(ctx, time.Second) }()
	svc, err := New(Defaults(), Deps{Shards: shards, Publisher: &grabtest.Publisher{}, Record: db.Flows, Switches: configcenter.NewHolder(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: log, Fence: fence})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	grab := func(rid string) Result {
		res, err := svc.Grab(ctx, Request{RequestID: rid, Pin: "p-" + rid, IP: "1.1.1.1", Items: []Item{{PromoID: id, Type: 1, Num: 1}}})
		if err != nil {
			t.Fatalf("grab %s: %v", rid, err)
		}
		return res
	}
	for start := time.Now(); !fence.Fenced(lost); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 30*time.Second { // a hang guard: the first poll reads MySQL
			t.Fatal("the lost shard was never fenced")
		}
	}
	if res := grab("before"); res.Result != Unavailable {
		t.Fatalf("grab on the lost shard: %+v, want UNAVAILABLE", res)
	}

	bin := buildRecovery(t)
	cmd := exec.CommandContext(ctx, bin, "rebuild", "--shard", "9", "--quiet", "--force",
		"--settle", "0s", "--catchup-timeout", "1s", "--admin-grace", "0s",
		"--redis", strings.Join(server.Addrs(), ","), "--mysql", dsn, "--kafka", "127.0.0.1:1")
	out, err := cmd.CombinedOutput()
	// Nothing between the exit and the grab: that is the moment on-call means.
	res := grab("after")
	if err != nil {
		t.Fatalf("rebuild: %v\n%s", err, out)
	}
	if res.Result != Granted {
		t.Fatalf("grab right after the rebuild exited: %+v, want GRANTED\nrebuild printed:\n%s", res, out)
	}
	if !strings.Contains(string(out), "served by") {
		t.Fatalf("the summary does not say which instances serve the shard:\n%s", out)
	}
	if lost != ring.Default.Shard(promo.Key(id, 1)) {
		t.Fatal("test set-up: the promotion is not on the lost shard")
	}
}

// buildRecovery builds bin/recovery from this checkout into the test's directory.
func buildRecovery(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "recovery")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/flashsale/platform/recovery")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build bin/recovery: %v\n%s", err, out)
	}
	return bin
}
