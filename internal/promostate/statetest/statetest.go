// Package statetest reads the promo-state topic in tests.
package statetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/promostate"
)

// Events reads the promo-state topic of brokers from its start until it holds
// want events of promotions whose id ends in suffix (or 15 s pass), and half a
// second more for any repeat. It checks each message's key, seq and time, and
// returns them as "<promoId without suffix> <STATE>", in seq order per promotion.
func Events(t testing.TB, brokers []string, suffix string, want int) []string {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: fmt.Sprint("states-", suffix, "-", time.Now().UnixNano()),
		Topic: promostate.Topic, StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var evs []promostate.Event
	for {
		if len(evs) == want {
			var more context.CancelFunc
			ctx, more = context.WithTimeout(ctx, 500*time.Millisecond)
			defer more()
		}
		m, err := r.ReadMessage(ctx)
		if err != nil {
			break
		}
		var ev promostate.Event
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			t.Fatalf("promo-state message %s: %v", m.Value, err)
		}
		if string(m.Key) != ev.PromotionKey || ev.PromotionKey != promo.Key(ev.PromoID, ev.Type) || ev.Seq <= 0 {
			t.Fatalf("promo-state message key %s, value %s", m.Key, m.Value)
		}
		if _, err := time.Parse(time.RFC3339Nano, ev.OccurredAt); err != nil {
			t.Fatalf("occurredAt of %s: %v", m.Value, err)
		}
		if strings.HasSuffix(ev.PromoID, suffix) {
			evs = append(evs, ev)
		}
	}
	slices.SortStableFunc(evs, func(a, b promostate.Event) int {
		if c := strings.Compare(a.PromoID, b.PromoID); c != 0 {
			return c
		}
		return int(a.Seq - b.Seq)
	})
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = strings.TrimSuffix(ev.PromoID, "-"+suffix) + " " + ev.State
	}
	return out
}
