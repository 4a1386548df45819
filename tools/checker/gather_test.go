package checker

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

// Read takes an envelope pool as the stack keeps it (the real scripts on the
// stack's shard, the record in a throwaway database) and Verify passes it; an
// envelope then lost from the pool's sorted set is found.
func TestReadAnEnvelopePool(t *testing.T) {
	ctx := context.Background()
	shards := testenv.Shards(t)
	db, err := store.Open(ctx, testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	p := Promotion{PromoID: "chk-pool-" + testenv.Suffix(), Type: 1, Total: 4, PerPin: 2, EnvelopeAmount: 100}
	key := p.Key()
	shard := ring.Default.Shard(key)
	c := shards[shard]
	outbox := "{" + key + "}:test-outbox" // the test's own: no state event reaches the stack
	t.Cleanup(func() {
		keys := promo.Keys(key)
		c.Del(context.Background(), append(keys[:], outbox)...)
	})
	split := []int64{10, 20, 30, 40}
	now := time.Now()
	if code, err := lua.Create(ctx, c, shard, key, lua.AdminSpec{Ver: 1, Total: p.Total, PerPin: p.PerPin, MaxPerGrab: 2, StartMs: now.Add(-time.Hour).UnixMilli(),
		EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE", Envelope: split}); err != nil || code != lua.AdminOK {
		t.Fatalf("create the pool: %v %v", code, err)
	}
	if _, err := db.DB().ExecContext(ctx, `INSERT INTO promotion (promo_id, promo_type, total, start_at, end_at, state, remaining, envelope_amount, envelope_min)
		VALUES (?, 1, 4, ?, ?, 'ACTIVE', 4, 100, 10)`, p.PromoID, now.Add(-time.Hour).UTC(), now.Add(time.Hour).UTC()); err != nil {
		t.Fatal(err)
	}
	for i, a := range split {
		if _, err := db.DB().ExecContext(ctx, `INSERT INTO promotion_envelope (promo_id, promo_type, idx, amount) VALUES (?, 1, ?, ?)`, p.PromoID, i, a); err != nil {
			t.Fatal(err)
		}
	}

	// r1 takes 2 envelopes and keeps them; r2 takes 1 and cancels it.
	var reqs []Request
	record := func(rid, kind string, num int64, env lua.Envelope) {
		t.Helper()
		var idxs []string
		for _, idx := range env.Parts {
			idxs = append(idxs, strconv.Itoa(idx))
		}
		parts := strings.Join(idxs, ",")
		if _, err := db.DB().ExecContext(ctx, `INSERT INTO grab_flow (event_id, kind, request_id, pin, ip, promo_id, promo_type, num, shard, occurred_at, amount, parts)
			VALUES (?, ?, ?, ?, '10.0.0.1', ?, 1, ?, ?, ?, ?, ?)`, kind+"-"+rid, kind, rid, "pin-"+rid, p.PromoID, num, shard, now.UTC(), env.Amount, parts); err != nil {
			t.Fatal(err)
		}
	}
	grab := func(rid string, num int64, cancel bool) {
		t.Helper()
		r, err := lua.Grab(ctx, c, lua.GrabCall{NowMs: now.UnixMilli(), DeadlineMs: now.Add(time.Minute).UnixMilli(), RequestID: rid, BodyHash: "h",
			Pin: "pin-" + rid, IP: "10.0.0.1", RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: num}}, Outbox: outbox})
		if err != nil || r.Code != lua.CodeOK || len(r.Envelopes) != 1 {
			t.Fatalf("grab %s: %+v %v", rid, r, err)
		}
		if code, err := lua.Commit(ctx, c, rid, []string{key}); err != nil || code != lua.CommitCommitted {
			t.Fatalf("commit %s: %v %v", rid, code, err)
		}
		env := r.Envelopes[0]
		record(rid, "GRAB", num, env)
		req := Request{RequestID: rid, Pin: "pin-" + rid, IP: "10.0.0.1", Items: []Item{{PromoID: p.PromoID, Type: 1, Num: num, Amount: env.Amount}}, Grab: "GRANTED"}
		if cancel {
			for _, mode := range []lua.ReturnMode{lua.ReturnCancel, lua.ReturnFinalize} {
				if r, err := lua.Return(ctx, c, lua.ReturnCall{RequestID: rid, Pin: "pin-" + rid, Mode: mode, NowMs: now.UnixMilli(), Keys: []string{key}, Outbox: outbox}); err != nil || r.Returned != 1 {
					t.Fatalf("%s %s: %+v %v", mode, rid, r, err)
				}
			}
			record(rid, "CANCEL", num, env)
			req.Cancel, req.Items[0].Returned = "RETURNED", env.Amount
		}
		reqs = append(reqs, req)
	}
	grab("r1", 2, false)
	grab("r2", 1, true)

	src := Sources{DB: db.DB()}
	for _, s := range shards {
		src.Shards = append(src.Shards, redis.UniversalClient(s))
	}
	snap, err := src.Read(ctx, []Promotion{p})
	if err != nil {
		t.Fatal(err)
	}
	st := snap.Redis[key]
	if st.EnvAmount != 100 || st.EnvLeft != 70 || len(st.Pool) != 2 || st.Pool[2] != 30 || st.Pool[3] != 40 {
		t.Fatalf("Redis read as envAmount %d, envLeft %d, pool %v; want 100, 70, {2:30 3:40}", st.EnvAmount, st.EnvLeft, st.Pool)
	}
	if sp := snap.Splits[key]; !sp.Found || sp.Amount != 100 || len(sp.Parts) != 4 {
		t.Fatalf("split read as %+v", sp)
	}
	if rep := Verify([]Promotion{p}, reqs, snap); rep.Failed() {
		t.Fatalf("a consistent pool fails:\n%s", rep.String())
	}

	if err := c.ZRem(ctx, promo.EnvelopeKey(key), lua.EnvelopeMember(3, 40)).Err(); err != nil {
		t.Fatal(err)
	}
	if snap, err = src.Read(ctx, []Promotion{p}); err != nil {
		t.Fatal(err)
	}
	if rep := Verify([]Promotion{p}, reqs, snap); rep.EnvelopeFaults == 0 || rep.AmountDrift == 0 {
		t.Fatalf("an envelope lost from the pool is not found:\n%s", rep.String())
	}
}
