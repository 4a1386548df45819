package lua

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
)

// A script's work per call must stay small and bounded (the pitfalls: rate-limit
// scripts at 10-15 ms in SLOWLOG, many scripts in one event-loop cycle stalling a
// node). Every command the scripts run is O(1) on one field or O(log n) on one
// member, and a key that may be large is freed with UNLINK, off the main thread,
// never DEL; no command walks a hash or set (HGETALL, HKEYS, ZRANGE, SCAN...).
func TestScriptsRunOnlyBoundedCommands(t *testing.T) {
	bounded := []string{"EXISTS", "HDEL", "HGET", "HINCRBY", "HMGET", "HSET", "PERSIST", "PEXPIRE", "RENAME", "SET", "UNLINK", "ZADD", "ZCARD", "ZPOPMIN", "ZREM"}
	call := regexp.MustCompile(`redis\.p?call\(\s*([^,)]*)`)
	for name, src := range map[string]string{"q.lua": qSrc, "commit.lua": commitPrelude + commitSrc, "return.lua": returnSrc,
		"create.lua": createSrc, "patch.lua": patchSrc, "stop.lua": stopSrc, "delete.lua": deleteSrc} {
		calls := call.FindAllStringSubmatch(src, -1)
		if len(calls) == 0 {
			t.Errorf("%s: no redis.call found; the pattern no longer matches the scripts", name)
		}
		for _, m := range calls {
			cmd, err := strconv.Unquote(strings.ReplaceAll(m[1], "'", `"`))
			if err != nil || !slices.Contains(bounded, strings.ToUpper(cmd)) {
				t.Errorf("%s: redis.call(%s): not a literal command of the bounded set %v", name, m[1], bounded)
			}
		}
	}
	// The hold scripts touch the request index entry (SET NX) and the holds sets,
	// whose ranges are read a bounded number at a time (LIMIT).
	holdBounded := []string{"SET", "ZADD", "ZREM", "ZRANGEBYSCORE", "ZSCORE"}
	for name, src := range map[string]string{"claimhold.lua": claimHoldSrc, "holddue.lua": holdDueSrc, "confirmhold.lua": confirmHoldSrc} {
		for _, m := range call.FindAllStringSubmatch(src, -1) {
			cmd, err := strconv.Unquote(strings.ReplaceAll(m[1], "'", `"`))
			if err != nil || !slices.Contains(holdBounded, strings.ToUpper(cmd)) {
				t.Errorf("%s: redis.call(%s): not a literal command of the bounded set %v", name, m[1], holdBounded)
			}
		}
		for _, line := range strings.Split(src, "\n") {
			if strings.Contains(line, "'ZRANGEBYSCORE'") && !strings.Contains(line, "'LIMIT'") {
				t.Errorf("%s: a range read without LIMIT: %s", name, strings.TrimSpace(line))
			}
		}
	}
}

// The same, measured: a grab, its commit and a cancel run exactly the same Redis
// commands on a promotion holding 100,000 ledger entries, pins and ips and 10,000
// open takes as on a fresh one (INFO commandstats; not timed). Not parallel: the
// statistics are the server's.
func TestScriptWorkDoesNotGrowWithThePromotion(t *testing.T) {
	ctx := context.Background()
	run := func(k, rid string) map[string]int64 {
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if r := mustGrab(t, grabCall(rid, "pin-"+rid, "10.0.0.1", item(k, 1))); r.Code != CodeOK {
			t.Fatalf("grab %s: %+v", rid, r)
		}
		if code, err := Commit(ctx, rdb, rid, []string{k}); err != nil || code != CommitCommitted {
			t.Fatalf("commit %s: %v %v", rid, code, err)
		}
		if r, err := Return(ctx, rdb, ReturnCall{RequestID: rid, Pin: "pin-" + rid, Mode: ReturnCancel, Reason: "USER_CANCELLED",
			NowMs: now, Keys: []string{k}}); err != nil || r.Code != ReturnReturned {
			t.Fatalf("cancel %s: %+v %v", rid, r, err)
		}
		return testenv.CommandCalls(t, rdb)
	}
	spec := baseSpec()
	spec.Total = 1_000_000
	fresh, big := promoKey(t, "fresh"), promoKey(t, "big")
	mustCreate(t, fresh, spec)
	mustCreate(t, big, spec)
	p := rdb.Pipeline()
	for i := range 100_000 {
		id := fmt.Sprint(i)
		p.HSet(ctx, promo.LedgerKey(big), "old-"+id, `{"s":"G","h":"x","n":1,"p":"p","i":"i","d":0}`)
		p.HSet(ctx, promo.PinsKey(big), "pin-old-"+id, 1)
		p.HSet(ctx, promo.IPsKey(big), "ip-old-"+id, 1)
		if i < 10_000 {
			p.ZAdd(ctx, promo.PendingKey(big), redis.Z{Score: float64(now + 60_000), Member: "open-" + id})
		}
		if i%5_000 == 4_999 {
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	small, large := run(fresh, "w1"), run(big, "w2")
	t.Logf("a grab, commit and cancel ran %v", small)
	if len(small) == 0 || !maps.Equal(small, large) {
		t.Fatalf("commands run by a grab, commit and cancel:\n  fresh promotion %v\n  large promotion %v", small, large)
	}
}
