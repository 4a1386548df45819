// Package invariants checks docs/CONTRACT.md's invariants for a promotion against what
// the clients were told: the demo, the benchmarks and the fault drills share it.
package invariants

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
)

// Promotion is what the checks need to know of one promotion.
type Promotion struct {
	PromoID       string
	Type          int
	Total         int64
	PerPin, PerIP int64
}

// Told is what clients were answered about one promotion: units GRANTED minus
// units RETURNED, in all and per pin.
type Told struct {
	Units  int64
	PerPin map[string]int64
}

// Result is one invariant's verdict.
type Result struct {
	Name   string
	Pass   bool
	Detail string
}

func (r Result) String() string {
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s  %-26s %s", verdict, r.Name, r.Detail)
}

// Checker reads a promotion's shard and, when db is set, the record.
type Checker struct {
	Shard  func(key string) redis.UniversalClient
	DB     *store.Store
	Settle time.Duration // how long to wait for open takes and the flow sink
}

// Check runs invariants 1 to 3 (and 4 when a database is given).
func (c Checker) Check(ctx context.Context, p Promotion, told Told) []Result {
	key := promo.Key(p.PromoID, p.Type)
	rdb := c.Shard(key)
	open := c.waitSettled(ctx, rdb, key)
	h, found, err := lua.ReadHash(ctx, rdb, key)
	if err != nil || !found {
		return []Result{{Name: "promotion readable", Detail: fmt.Sprintf("found=%v err=%v", found, err)}}
	}
	granted := h.Total - h.Remaining
	pins, _ := rdb.HGetAll(ctx, promo.PinsKey(key)).Result()
	ips, _ := rdb.HGetAll(ctx, promo.IPsKey(key)).Result()
	out := []Result{
		{Name: "1 no oversell", Pass: granted <= p.Total && h.Remaining >= 0,
			Detail: fmt.Sprintf("granted %d of total %d, remaining %d", granted, p.Total, h.Remaining)},
		limits(p, pins, ips),
		leaks(granted, told, pins, open),
	}
	if c.DB != nil {
		out = append(out, c.record(ctx, p, granted))
	}
	return out
}

// waitSettled waits until no take of the promotion is open (pending or owing a CANCEL).
func (c Checker) waitSettled(ctx context.Context, rdb redis.UniversalClient, key string) int64 {
	deadline := time.Now().Add(c.Settle)
	for {
		n, err := rdb.ZCard(ctx, promo.PendingKey(key)).Result()
		if (err == nil && n == 0) || time.Now().After(deadline) {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func limits(p Promotion, pins, ips map[string]string) Result {
	worstPin, worstIP := maxField(pins), maxField(ips)
	pass := (p.PerPin == 0 || worstPin <= p.PerPin) && (p.PerIP == 0 || worstIP <= p.PerIP)
	return Result{Name: "2 limits hold", Pass: pass,
		Detail: fmt.Sprintf("most held by one pin %d (limit %d), by one ip %d (limit %d)", worstPin, p.PerPin, worstIP, p.PerIP)}
}

func leaks(granted int64, told Told, pins map[string]string, open int64) Result {
	pass := granted == told.Units && open == 0
	mismatched := 0
	if told.PerPin != nil {
		for pin, n := range told.PerPin {
			if held, _ := strconv.ParseInt(pins[pin], 10, 64); held != n {
				mismatched++
			}
		}
		for pin, v := range pins {
			if held, _ := strconv.ParseInt(v, 10, 64); held != told.PerPin[pin] {
				mismatched++
			}
		}
	}
	pass = pass && mismatched == 0
	return Result{Name: "3 nothing leaks", Pass: pass,
		Detail: fmt.Sprintf("Redis granted %d, answers GRANTED-RETURNED %d, pins disagreeing %d, takes still open %d", granted, told.Units, mismatched, open)}
}

func (c Checker) record(ctx context.Context, p Promotion, granted int64) Result {
	deadline := time.Now().Add(c.Settle)
	var byRecord int64
	var err error
	for {
		byRecord, err = c.DB.Flows.GrantedByRecord(ctx, p.PromoID, p.Type)
		if (err == nil && byRecord == granted) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return Result{Name: "4 the record agrees", Pass: err == nil && byRecord == granted,
		Detail: fmt.Sprintf("MySQL flow log grants %d, Redis %d (err %v)", byRecord, granted, err)}
}

func maxField(m map[string]string) int64 {
	var worst int64
	for _, v := range m {
		if n, _ := strconv.ParseInt(v, 10, 64); n > worst {
			worst = n
		}
	}
	return worst
}
