package flowsink_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
)

// The sink stores a GRAB's channel in grab_flow.channel (NULL for a grab that
// named none and for the CANCEL, even one that carries a channel: a CANCEL's is
// its GRAB's), so finance counts sales by channel; an event whose channel is no
// channel of the contract is dead-lettered, not stored.
func TestSinkStoresTheChannel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	brokers, db := rt.KafkaAndStore(t)
	id := "sinkch-" + testenv.Suffix()
	rt.Create(t, db.Promotions, rt.Shards(t, nil), rt.Spec{PromoID: id, Total: 10, Channels: promo.Channels(promo.ChannelAPP | promo.ChannelQQ)})
	event := func(kind flow.Kind, rid, channel string) kafka.Message {
		e := flow.Event{EventID: string(kind) + "-" + rid, Kind: kind, RequestID: rid + "-" + id, Pin: "p-" + rid, IP: "10.0.0.1",
			Items: []flow.Item{{PromoID: id, Type: 1, Num: 1}}, OccurredAt: flow.Stamp(time.Now()), Channel: channel}
		if kind == flow.Grab {
			e.BodyHash = "h"
		} else {
			e.Reason = "USER_CANCELLED"
		}
		return kafka.Message{Key: []byte(e.RequestID), Value: e.AppendJSON(nil)}
	}
	if err := rt.FlowWriter(t, brokers).WriteMessages(ctx, event(flow.Grab, "app", "APP"), event(flow.Grab, "qq", "QQ"), event(flow.Cancel, "qq", "QQ"),
		event(flow.Grab, "none", ""), event(flow.Grab, "bad", "SMS")); err != nil {
		t.Fatal(err)
	}
	m, stop := rt.RunSink(t, brokers, "sink-ch", db.Flows)
	caughtUp(t, brokers, "sink-ch", 60*time.Second)
	stop()
	channel := func(rid string, kind flow.Kind) (string, bool) {
		var ch sql.NullString
		err := db.DB().QueryRow("SELECT channel FROM grab_flow WHERE request_id = ? AND kind = ?", rid+"-"+id, string(kind)).Scan(&ch)
		if err == sql.ErrNoRows {
			return "", false
		}
		if err != nil {
			t.Fatal(err)
		}
		return ch.String, true
	}
	for _, c := range []struct {
		rid  string
		kind flow.Kind
		want string
	}{{"app", flow.Grab, "APP"}, {"qq", flow.Grab, "QQ"}, {"qq", flow.Cancel, ""}, {"none", flow.Grab, ""}} {
		if have, ok := channel(c.rid, c.kind); !ok || have != c.want {
			t.Errorf("%s %s: channel %q (stored %v), want %q", c.rid, c.kind, have, ok, c.want)
		}
	}
	if _, ok := channel("bad", flow.Grab); ok {
		t.Error("an event of channel SMS was stored")
	}
	if have := testutil.ToFloat64(m.DeadLetters); have != 1 {
		t.Errorf("dead letters: %v, want the SMS one", have)
	}
}
