package rebuild_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/recovery/internal/flowlag"
	"github.com/flashsale/platform/recovery/internal/rebuild"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
	"github.com/flashsale/platform/recovery/internal/verify"
)

// A promotion whose flow events are in the dead-letter topic, not the record, is
// not rebuilt from the record (it would sell what was granted, or withhold what
// was returned) until the events are replayed or on-call overrides; verify names
// it. A dead letter naming no promotion it could read refuses every rebuild.
func TestRebuildRefusesDeadLetteredPromotions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	own := rt.StartRedis(t)
	all := map[int]string{}
	for i := range ring.Shards {
		all[i] = own.Addr // one private server for every shard: the markers stay ours
	}
	shards := rt.Shards(t, all)
	brokers := rt.Kafka(t).ListenAddrs()
	db := rt.OpenStore(t)
	id := "dead-" + testenv.Suffix()
	key := rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: id, Total: 10})
	shard := ring.Default.Shard(key)
	d := rebuild.Deps{Shards: shards, Record: db.Rebuild, Flows: db.Flows, Lag: flowlag.NewMeter(brokers, kafkaauth.Auth{}, flow.Topic, "nobody"), Log: quiet()}
	o := options(shard)
	o.Force = true // no sink in this test: the dead letters are what is refused

	grab := flow.Event{EventID: "e-" + id, Kind: flow.Grab, RequestID: "r-" + id, Pin: "p", IP: "10.0.0.1", BodyHash: "h",
		Items: []flow.Item{{PromoID: id, Type: 1, Num: 2, Shard: shard}}, OccurredAt: flow.Stamp(time.Now())}
	letter := store.DeadLetter{Source: "promo-grab-flow/3@17", RequestID: grab.RequestID, Kind: string(flow.Grab), ID: store.ID{PromoID: id, Type: 1}, Cause: "a bug"}
	if err := db.Flows.RecordDeadLetters(ctx, []store.DeadLetter{letter, letter}); err != nil {
		t.Fatal(err)
	}
	if _, err := rebuild.Run(ctx, d, o); !errors.Is(err, rebuild.ErrRefused) || !strings.Contains(err.Error(), id) {
		t.Fatalf("rebuild of a dead-lettered promotion: %v; want a refusal naming %s", err, id)
	}
	rep, err := verify.Run(ctx, verify.Deps{Shards: shards, Record: db.Rebuild, Log: quiet()}, verify.Options{Shards: []int{shard}})
	if err != nil || len(rep.DeadLetters) != 1 || rep.DeadLetters[0].Record != 1 {
		t.Fatalf("verify's dead letters: %+v (err %v); want the promotion named with 1", rep.DeadLetters, err)
	}
	o.IgnoreDeadLetters = true
	if sum, err := rebuild.Run(ctx, d, o); err != nil || !strings.Contains(strings.Join(sum.Warnings, ";"), "dead-lettered") {
		t.Fatalf("rebuild told to ignore dead letters: %v, warnings %v", err, sum.Warnings)
	}
	o.IgnoreDeadLetters = false
	if _, err := db.Flows.InsertFlows(ctx, []flow.Event{grab}); err != nil { // the dead letter replayed
		t.Fatal(err)
	}
	if _, err := rebuild.Run(ctx, d, o); err != nil {
		t.Fatalf("rebuild once the dead letter is replayed: %v", err)
	}
	unreadable := store.DeadLetter{Source: "promo-grab-flow/5@1", RequestID: "?", Cause: "not JSON"}
	if err := db.Flows.RecordDeadLetters(ctx, []store.DeadLetter{unreadable}); err != nil {
		t.Fatal(err)
	}
	if _, err := rebuild.Run(ctx, d, o); !errors.Is(err, rebuild.ErrRefused) || !strings.Contains(err.Error(), "naming no promotion") {
		t.Fatalf("rebuild with a dead letter naming no promotion: %v; want a refusal", err)
	}
}
