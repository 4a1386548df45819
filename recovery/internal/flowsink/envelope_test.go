package flowsink_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/testenv"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
)

// An envelope pool's GRAB and CANCEL land in grab_flow with their amount and
// parts (comma-separated idx, in the order taken); an item of no pool leaves both
// NULL.
func TestSinkStoresEnvelopeAmountsAndParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	brokers, db := rt.Kafka(t).ListenAddrs(), rt.OpenStore(t)
	suffix := testenv.Suffix()
	pool, plain := "pool-"+suffix, "plain-"+suffix
	now := flow.Stamp(time.Now())
	grab := flow.Event{EventID: "g-" + suffix, Kind: flow.Grab, RequestID: "env-" + suffix, Pin: "p", IP: "10.0.0.1", OccurredAt: now, BodyHash: "h",
		Items: []flow.Item{{PromoID: pool, Type: 1, Num: 3, Shard: 3, Amount: 1207, Parts: []int{4, 5, 9}}}}
	cancel := grab
	cancel.EventID, cancel.Kind, cancel.Reason, cancel.BodyHash = "c-"+suffix, flow.Cancel, "USER_CANCELLED", ""
	other := flow.Event{EventID: "o-" + suffix, Kind: flow.Grab, RequestID: "plain-" + suffix, Pin: "p", IP: "10.0.0.1", OccurredAt: now, BodyHash: "h",
		Items: []flow.Item{{PromoID: plain, Type: 1, Num: 2, Shard: 3}}}
	sale := rt.NewSale(nil, brokers)
	defer sale.Close()
	if err := sale.Publish(ctx, grab, cancel, other); err != nil {
		t.Fatal(err)
	}
	rt.RunSink(t, brokers, "sink-envelope", db.Flows)
	caughtUp(t, brokers, "sink-envelope", 30*time.Second)

	for _, want := range []struct {
		rid, kind string
		amount    sql.NullInt64
		parts     sql.NullString
	}{
		{grab.RequestID, "GRAB", sql.NullInt64{Int64: 1207, Valid: true}, sql.NullString{String: "4,5,9", Valid: true}},
		{grab.RequestID, "CANCEL", sql.NullInt64{Int64: 1207, Valid: true}, sql.NullString{String: "4,5,9", Valid: true}},
		{other.RequestID, "GRAB", sql.NullInt64{}, sql.NullString{}},
	} {
		var amount sql.NullInt64
		var parts sql.NullString
		if err := db.DB().QueryRow(`SELECT amount, parts FROM grab_flow WHERE request_id = ? AND kind = ?`, want.rid, want.kind).Scan(&amount, &parts); err != nil {
			t.Fatalf("%s %s: %v", want.kind, want.rid, err)
		}
		if amount != want.amount || parts != want.parts {
			t.Errorf("%s %s: amount %+v parts %+v; want %+v %+v", want.kind, want.rid, amount, parts, want.amount, want.parts)
		}
	}
	// The contract's sum for finance: what the pool handed out, by the record.
	var handedOut int64
	if err := db.DB().QueryRow(`SELECT COALESCE(SUM(CASE kind WHEN 'GRAB' THEN amount ELSE -amount END), 0) FROM grab_flow
 WHERE promo_id = ? AND promo_type = 1`, pool).Scan(&handedOut); err != nil || handedOut != 0 {
		t.Errorf("handed out by the record: %d (%v); want 0 after the cancel", handedOut, err)
	}
}
