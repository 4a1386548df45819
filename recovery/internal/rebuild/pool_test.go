package rebuild

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

// lateRows is the record with rows landing while the rebuild reads it (a
// rollback's CANCEL the fence lets through, anything under --force): late goes in
// just before the flow log is read.
type lateRows struct {
	*store.Rebuild
	flows *store.Flows
	late  []flow.Event
}

func (r *lateRows) EachFlow(ctx context.Context, id store.ID, fn func(store.FlowRow) error) error {
	if len(r.late) > 0 {
		if _, err := r.flows.InsertFlows(ctx, r.late); err != nil {
			return err
		}
		r.late = nil
	}
	return r.Rebuild.EachFlow(ctx, id, fn)
}

// A pool's envelopes left and its ledger agree whatever lands in the flow log
// while the rebuild reads it: here r2's GRAB of part 1 and r1's CANCEL giving part
// 0 back. Part 1 is out of the pool, held by r2's G entry (not handed out twice),
// and part 0 is in it, r1's entry returned (not lost). The hash carries envLeft,
// remaining as the envelopes left, and the split's envDigest.
func TestRebuiltPoolAgreesWithItsLedgerWhileRowsLand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openRecord(t)
	now := time.Now()
	split := []int64{10, 20, 30, 40}
	spec := promo.Spec{PromoID: "late-" + testenv.Suffix(), Type: 1, Title: "late rows", Total: 4, PerPinLimit: 4, PerIPLimit: 4,
		MaxPerGrab: 2, StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour), Envelope: &promo.Envelope{Amount: 100, MinAmount: 10}}
	p := promoted(t, db, spec, split, now)
	event := func(kind flow.Kind, rid string, part int) flow.Event {
		return flow.Event{EventID: string(kind) + "-" + rid, Kind: kind, RequestID: rid, Pin: "pin-" + rid, IP: "10.4.0.1", BodyHash: "h-" + rid,
			OccurredAt: flow.Stamp(now), Items: []flow.Item{{PromoID: spec.PromoID, Type: 1, Num: 1, Amount: split[part], Parts: []int{part}}}}
	}
	if _, err := db.Flows.InsertFlows(ctx, []flow.Event{event(flow.Grab, "r1", 0)}); err != nil {
		t.Fatal(err)
	}
	rec := &lateRows{Rebuild: db.Rebuild, flows: db.Flows, late: []flow.Event{event(flow.Grab, "r2", 1), event(flow.Cancel, "r1", 0)}}

	c := ownRedis(t)
	out, err := restorePromotion(ctx, c, rec, targets(p)[0], 20, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range out.Warnings {
		if strings.Contains(w, "envelope") {
			t.Errorf("warned: %s", w)
		}
	}
	key := spec.Key()
	pool := c.ZRange(ctx, promo.EnvelopeKey(key), 0, -1).Val()
	if want := []string{lua.EnvelopeMember(0, 10), lua.EnvelopeMember(2, 30), lua.EnvelopeMember(3, 40)}; !slices.Equal(pool, want) {
		t.Errorf("envelopes left %q, want %q", pool, want)
	}
	h, _, err := lua.ReadHash(ctx, c, key)
	if err != nil {
		t.Fatal(err)
	}
	if h.EnvAmount != 100 || h.EnvLeft != 80 || h.Remaining != 3 || h.EnvDigest != lua.EnvelopeDigest(split) {
		t.Errorf("hash: envAmount %d, envLeft %d, remaining %d, envDigest %q; want 100, 80, 3 and %q",
			h.EnvAmount, h.EnvLeft, h.Remaining, h.EnvDigest, lua.EnvelopeDigest(split))
	}
	ledger := func(rid string) lua.LedgerEntry {
		e, ok, err := lua.ReadLedger(ctx, c, key, rid)
		if err != nil || !ok {
			t.Fatalf("%s's entry: %v %v", rid, ok, err)
		}
		return e
	}
	if e := ledger("r1"); e.State != lua.LedgerReturned || e.Parts != lua.EnvelopeParts([]int{0}, split) {
		t.Errorf("r1's entry %+v; want returned, with part 0", e)
	}
	if e := ledger("r2"); e.State != lua.LedgerCommitted || e.Parts != lua.EnvelopeParts([]int{1}, split) || e.Amount != 20 {
		t.Errorf("r2's entry %+v; want granted part 1, worth 20", e)
	}
}
