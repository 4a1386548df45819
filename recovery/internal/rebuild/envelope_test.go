package rebuild_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
	"github.com/flashsale/platform/recovery/internal/flowlag"
	"github.com/flashsale/platform/recovery/internal/rebuild"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
	"github.com/flashsale/platform/recovery/internal/verify"
)

// An envelope pool on a shard that is lost mid-sale, some envelopes granted and
// some given back (one by a CANCEL that names no parts: published after its
// ledger entry was gone), is rebuilt exactly: the same envelopes left (more than
// one chunk of them), envAmount, envLeft and envDigest, and every ledger entry with the
// parts its grab took, so a cancel after the rebuild gives back exactly those.
// verify then finds it clean, and names the envelope a planted ZREM took.
func TestLostPoolIsRebuiltExactly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, "sink-pool", nil)
	own, shards, db := w.own, w.shards, w.db
	suffix := testenv.Suffix()

	const envelopes = 1500 // more than one ZADD of lua.MaxEnvelopeStage
	split := promo.SplitEnvelope(envelopes*100, 10, envelopes, rand.New(rand.NewPCG(1, 2)))
	pool := rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: rt.IDOnShard("pool-"+suffix, lostShard), Total: envelopes, PerPin: 20, Envelope: split})
	s := rt.NewSale(shards, w.brokers)
	defer s.Close()

	held, returned := sale(t, s, []string{pool}, "pool-"+suffix, 4, 40)
	if len(held) < 2 || len(returned) == 0 {
		t.Fatalf("the sale held %d and returned %d; want both > 0", len(held), len(returned))
	}
	// A cancel whose CANCEL names no parts: the rebuild reads it as giving back
	// its GRAB's.
	bare := held[len(held)-1]
	held = held[:len(held)-1]
	cancelWithoutParts(t, s, bare)

	if err := w.deps.Lag.WaitCaughtUp(ctx, 30*time.Second, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	before := rt.Take(t, shards[lostShard], pool)
	if before.EnvAmount == 0 || before.EnvDigest != lua.EnvelopeDigest(split) || len(before.Envelopes) <= lua.MaxEnvelopeStage || int64(len(before.Envelopes)) != before.Remaining {
		t.Fatalf("before the loss: envAmount %d, envDigest %q, %d envelopes left, remaining %d; want a pool of its split's digest, more than %d left",
			before.EnvAmount, before.EnvDigest, len(before.Envelopes), before.Remaining, lua.MaxEnvelopeStage)
	}
	if e := before.Ledger[bare.rid]; e.State != lua.LedgerReturned || e.Parts == "" {
		t.Fatalf("the bare cancel's ledger entry %+v; want returned with its parts", e)
	}

	own.Kill()
	own.Start()
	if n := shards[lostShard].DBSize(ctx).Val(); n != 0 {
		t.Fatalf("the restarted server holds %d keys; want it empty", n)
	}
	sum, err := rebuild.Run(ctx, w.deps, options(lostShard))
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if len(sum.Warnings) != 0 {
		t.Errorf("rebuild warned: %q", sum.Warnings)
	}
	after := rt.Take(t, shards[lostShard], pool)
	if !reflect.DeepEqual(before, after) {
		t.Errorf("%s rebuilt differs:\nbefore %+v\nafter  %+v", pool, before, after)
	}

	// A cancel after the rebuild gives back exactly the parts its grab took.
	b := held[0]
	took, err := after.Ledger[b.rid].Envelope()
	if err != nil || !took.IsPool() {
		t.Fatalf("%s's ledger entry names no parts (%v)", b.rid, err)
	}
	if ok, err := s.Cancel(ctx, b.rid, b.pin, b.ip, b.key, b.num, "USER_CANCELLED"); err != nil || !ok {
		t.Fatalf("cancel %s after the rebuild: %v %v", b.rid, ok, err)
	}
	back := rt.Take(t, shards[lostShard], pool)
	if back.EnvLeft != after.EnvLeft+took.Amount || len(back.Envelopes) != len(after.Envelopes)+len(took.Parts) {
		t.Errorf("after the cancel: envLeft %d, %d envelopes; want %d and %d", back.EnvLeft, len(back.Envelopes), after.EnvLeft+took.Amount, len(after.Envelopes)+len(took.Parts))
	}
	for _, p := range took.Parts {
		if m := fmt.Sprintf("%d %s", p, lua.EnvelopeMember(p, split[p])); !slices.Contains(back.Envelopes, m) {
			t.Errorf("part %d not back in the pool after the cancel", p)
		}
	}

	// verify: clean, then a part taken out of the sorted set by hand is named.
	vd := verify.Deps{Shards: shards, Record: db.Rebuild, Lag: flowlag.NewMeter(w.brokers, kafkaauth.Auth{}, flow.Topic, "sink-pool"), Log: quiet()}
	vo := verify.Defaults()
	vo.Shards, vo.Rechecks, vo.RecheckDelay = []int{lostShard}, 1, 200*time.Millisecond
	rep, err := verify.Run(ctx, vd, vo)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Promotions) != 1 || len(rep.Drifts()) != 0 {
		var out bytes.Buffer
		rep.Print(&out, true)
		t.Fatalf("want the pool checked and no drift, have:\n%s", out.String())
	}
	_, member, _ := strings.Cut(back.Envelopes[len(back.Envelopes)/2], " ")
	idx, _, _ := lua.ParseEnvelopeMember(member)
	shards[lostShard].ZRem(ctx, promo.EnvelopeKey(pool), member)
	if rep, err = verify.Run(ctx, vd, vo); err != nil {
		t.Fatal(err)
	}
	ds := rep.Drifts()
	if len(ds) != 1 || ds[0].What != "envelopes" || ds[0].Key != pool || ds[0].Redis != ds[0].Record-1 ||
		!strings.HasPrefix(ds[0].Who, fmt.Sprintf("part %d: redis handed out, record %s", idx, member)) {
		t.Fatalf("want exactly the planted drift (part %d), have %+v", idx, ds)
	}
	var out bytes.Buffer
	rep.Print(&out, false)
	if text := out.String(); !strings.Contains(text, fmt.Sprintf("DRIFT  %s  shard %d  envelopes left", pool, lostShard)) || !strings.Contains(text, fmt.Sprintf("part %d", idx)) {
		t.Fatalf("report:\n%s", text)
	}
}

// cancelWithoutParts cancels b's grab as grab-service does, but publishes its
// CANCEL naming no parts, as one published after its ledger entry was gone would.
func cancelWithoutParts(t *testing.T, s *rt.Sale, b buyer) {
	t.Helper()
	ctx := context.Background()
	c := s.Shards[ring.Default.Shard(b.key)]
	now := time.Now()
	r, err := lua.Return(ctx, c, lua.ReturnCall{RequestID: b.rid, Pin: b.pin, Mode: lua.ReturnCancel, Reason: "USER_CANCELLED", NowMs: now.UnixMilli(), Keys: []string{b.key}})
	if err != nil || r.Code != lua.ReturnReturned {
		t.Fatalf("cancel %s: %+v %v", b.rid, r, err)
	}
	id, typ, _ := promo.ParseKey(b.key)
	ev := flow.Event{EventID: "bare-" + b.rid, Kind: flow.Cancel, RequestID: b.rid, Pin: b.pin, IP: b.ip, Reason: "USER_CANCELLED",
		Items: []flow.Item{{PromoID: id, Type: typ, Num: b.num, Shard: ring.Default.Shard(b.key)}}, OccurredAt: flow.Stamp(now)}
	if err := s.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := lua.Return(ctx, c, lua.ReturnCall{RequestID: b.rid, Mode: lua.ReturnFinalize, NowMs: now.UnixMilli(), Keys: []string{b.key}}); err != nil {
		t.Fatal(err)
	}
}
