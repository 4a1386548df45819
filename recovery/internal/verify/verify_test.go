package verify_test

// verify against the local stack's redis-servers (read only, but for the drift this
// test plants on its own promotion), a throwaway MariaDB database and an in-process
// Kafka cluster with a flow sink.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
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
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
	"github.com/flashsale/platform/recovery/internal/verify"
)

func TestVerifyReportsThePlantedDriftAndOnlyIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	brokers, db := rt.KafkaAndStore(t)
	const group = "sink-verify"
	rt.RunSink(t, brokers, group, db.Flows)
	shards := rt.Shards(t, nil)
	suffix := testenv.Suffix()
	var keys []string
	for i := 0; i < 3; i++ {
		keys = append(keys, rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: fmt.Sprintf("verify%d-%s", i, suffix), Total: 100, PerPin: 5}))
	}
	s := rt.NewSale(shards, brokers)
	defer s.Close()
	for i := 0; i < 60; i++ {
		key := keys[i%len(keys)]
		rid, pin := fmt.Sprintf("v-%s-%d", suffix, i), fmt.Sprintf("pin-%d", i%7)
		if ok, _, err := s.Grab(ctx, rid, pin, "10.2.0.1", key, 1); err != nil || !ok {
			t.Fatalf("grab %s: %v %v", rid, ok, err)
		}
		if i%6 == 0 {
			if _, err := s.Cancel(ctx, rid, pin, "10.2.0.1", key, 1, "USER_CANCELLED"); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := verify.Deps{Shards: shards, Record: db.Rebuild, Lag: flowlag.NewMeter(brokers, kafkaauth.Auth{}, flow.Topic, group), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	o := verify.Defaults()
	o.Rechecks, o.RecheckDelay = 1, 200*time.Millisecond

	rep, err := verify.Run(ctx, d, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Promotions) != len(keys) || len(rep.Drifts()) != 0 {
		var out bytes.Buffer
		rep.Print(&out, true)
		t.Fatalf("clean sale: want %d promotions and no drift, have:\n%s", len(keys), out.String())
	}
	var out bytes.Buffer
	rep.Print(&out, false)
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 {
		t.Fatalf("a clean verify prints one line, have:\n%s", out.String())
	}

	// Plant one drift by hand (a pin holds one more than the record says), and one
	// take in flight on another promotion, which must not count as drift.
	drifted, open := keys[1], keys[2]
	shards[ring.Default.Shard(drifted)].HIncrBy(ctx, promo.PinsKey(drifted), "pin-3", 1)
	// The open take is a real one (q.lua, never committed) with a deadline far enough
	// ahead that no reconciler sharing these servers settles it during the test.
	now := time.Now()
	if r, err := lua.Grab(ctx, shards[ring.Default.Shard(open)], lua.GrabCall{NowMs: now.UnixMilli(), DeadlineMs: now.Add(time.Hour).UnixMilli(),
		RequestID: "open-" + suffix, BodyHash: "h", Pin: "pin-open", IP: "10.2.0.9", RateFactorPermille: 1000,
		Items: []lua.GrabItem{{Key: open, Num: 1}}}); err != nil || r.Code != lua.CodeOK {
		t.Fatalf("open take: %+v %v", r, err)
	}

	rep, err = verify.Run(ctx, d, o)
	if err != nil {
		t.Fatal(err)
	}
	ds := rep.Drifts()
	if len(ds) != 1 || ds[0].Key != drifted || ds[0].What != "pin" || ds[0].Who != "pin-3" || ds[0].Redis != ds[0].Record+1 {
		t.Fatalf("want exactly the planted drift (%s pin pin-3), have %+v", drifted, ds)
	}
	out.Reset()
	rep.Print(&out, false)
	text := out.String()
	if !strings.Contains(text, "IN-FLIGHT  "+open) || !strings.Contains(text, `DRIFT  `+drifted) || !strings.Contains(text, "1 drifts in 1 promotions, 1 in flight") {
		t.Fatalf("report:\n%s", text)
	}
	t.Logf("report:\n%s", text)

	// The request index: every grab's entry where its claim would have written it
	// (this test's sale makes no claims), then one lost.
	var rids []string
	for i := 0; i < 60; i++ {
		rid := fmt.Sprintf("v-%s-%d", suffix, i)
		key := promo.RequestIndexKey(rid)
		shards[ring.Default.Shard(key)].Set(ctx, key, "{}", time.Hour)
		rids = append(rids, rid)
	}
	o.Index = true
	var bar bytes.Buffer
	o.Progress = &bar
	if rep, err = verify.Run(ctx, d, o); err != nil || len(rep.IndexDrifts) != 0 {
		t.Fatalf("every index entry present: want no index drift, have %+v (%v)", rep.IndexDrifts, err)
	}
	if p := bar.String(); !strings.Contains(p, fmt.Sprintf("%d/%d", len(keys), len(keys))) || !strings.Contains(p, "16/16") {
		t.Errorf("progress %q; want the %d promotions and the 16 index shards counted to the end", p, len(keys))
	}
	o.Progress = nil
	lost := promo.RequestIndexKey(rids[7])
	lostShard := ring.Default.Shard(lost)
	shards[lostShard].Del(ctx, lost)
	if rep, err = verify.Run(ctx, d, o); err != nil {
		t.Fatal(err)
	}
	if len(rep.IndexDrifts) != 1 || rep.IndexDrifts[0].Shard != lostShard || rep.IndexDrifts[0].Who != lost || rep.IndexDrifts[0].Record != rep.IndexDrifts[0].Redis+1 {
		t.Fatalf("want exactly the lost index entry %s on shard %d, have %+v", lost, lostShard, rep.IndexDrifts)
	}
	out.Reset()
	rep.Print(&out, false)
	if !strings.Contains(out.String(), "DRIFT  request index  shard "+fmt.Sprint(lostShard)) || !strings.Contains(out.String(), "request index drifts on 1 shards") {
		t.Fatalf("report:\n%s", out.String())
	}
}
