package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/tools/invariants"
	"github.com/flashsale/platform/tools/loadgen"
)

// tally counts what clients were told per promotion, for the invariant checks.
type tally struct {
	mu    sync.Mutex
	told  map[string]*invariants.Told
	total map[string]int64
}

func newTally() *tally {
	return &tally{told: map[string]*invariants.Told{}, total: map[string]int64{}}
}

// track registers a promotion whose answers are counted.
func (t *tally) track(id string, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.told[id] = &invariants.Told{PerPin: map[string]int64{}}
	t.total[id] = total
}

// seen counts one answer to buyer n about promotion id.
func (t *tally) seen(id string, n int64, a loadgen.Answer) {
	if a.Result != "GRANTED" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if told := t.told[id]; told != nil {
		told.Units++
		told.PerPin["p"+strconv.FormatInt(n%pinPool, 10)]++
	}
}

// checkInvariants runs the contract's invariants 1-3 on every promotion whose
// answers were counted: no oversell, limits hold, granted equals what clients were told.
func (b *bench) checkInvariants(ctx context.Context) {
	fmt.Fprintln(os.Stderr, "\n== invariants")
	checker := invariants.Checker{Settle: 10 * time.Second,
		Shard: func(key string) redis.UniversalClient { return b.shards[ring.Default.Shard(key)] }}
	ids := make([]string, 0, len(b.tally.told))
	for id := range b.tally.told {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	agg := map[string]*invariantRow{}
	var order []string
	for _, id := range ids {
		p := invariants.Promotion{PromoID: id, Type: 1, Total: b.tally.total[id]}
		for _, r := range checker.Check(ctx, p, *b.tally.told[id]) {
			row := agg[r.Name]
			if row == nil {
				row = &invariantRow{Name: r.Name, Pass: true}
				agg[r.Name] = row
				order = append(order, r.Name)
			}
			row.Promotions++
			if !r.Pass {
				row.Pass = false
				row.Failures = append(row.Failures, id+": "+r.Detail)
			}
		}
	}
	for _, name := range order {
		b.res.Invariants = append(b.res.Invariants, *agg[name])
	}
}

// invariantRow is one invariant over every promotion checked.
type invariantRow struct {
	Name       string
	Pass       bool
	Promotions int
	Failures   []string
}
