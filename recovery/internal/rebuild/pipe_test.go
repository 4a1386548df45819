package rebuild

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
)

// A Redis that refuses writes part-way (out of memory here) ends the rebuild of a
// promotion with that error, promptly: the read of the flow log stops, the ledger
// goroutine and the pipeline in flight finish, and the live keys are never swapped.
func TestRestoreStopsAtTheFirstRefusedWrite(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := store.Open(ctx, testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	spec := promo.Spec{PromoID: "oom-" + testenv.Suffix(), Type: 1, Title: "oom", Total: 1_000_000, PerPinLimit: 10,
		PerIPLimit: 1000, MaxPerGrab: 5, StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour)}
	if err := db.Promotions.Insert(ctx, store.NewPromotion(spec, promo.Active, now)); err != nil {
		t.Fatal(err)
	}
	p, err := db.Promotions.Promote(ctx, store.ID{PromoID: spec.PromoID, Type: 1}, 1, now)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 20_000 // about 2 MB of ledger entries
	var events []flow.Event
	for i := range rows {
		events = append(events, flow.Event{EventID: fmt.Sprintf("e%d", i), Kind: flow.Grab, RequestID: fmt.Sprintf("oom-request-%06d", i),
			Pin: fmt.Sprintf("pin-%d", i), IP: "10.1.0.1", BodyHash: strings.Repeat("h", 40), OccurredAt: flow.Stamp(now),
			Items: []flow.Item{{PromoID: spec.PromoID, Type: 1, Num: 1}}})
	}
	if _, err := db.Flows.InsertFlows(ctx, events); err != nil {
		t.Fatal(err)
	}

	srv := testenv.StartRedis(t, testenv.Volatile)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	_, err = restorePromotion(ctx, c, db.Rebuild, targets(p)[0], 20, nil)
	if err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("want the refused write's error (OOM), have %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the rebuild hung until the test's deadline: %v", err)
	}
	if n, err := c.Exists(ctx, spec.Key()).Result(); err != nil || n != 0 {
		t.Errorf("the live promotion key exists (%d, %v): a failed rebuild must not swap", n, err)
	}
	t.Logf("refused after %s: %v", time.Since(start).Round(time.Millisecond), err)
}
