package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/promostate"
)

// showStateEvents prints the promo-state events of one promotion, as the price
// system reads them, from the topic's start until want have come (or 10 s pass),
// and returns their states in seq order.
func showStateEvents(ctx context.Context, brokers []string, key string, want int) ([]string, error) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: promostate.Topic, GroupID: fmt.Sprintf("demo-%s-%d", key, time.Now().UnixNano()),
		StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var states []string
	for len(states) < want {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return states, fmt.Errorf("read %s: %d of %d events of %s: %w", promostate.Topic, len(states), want, key, err)
		}
		if string(m.Key) != key {
			continue
		}
		var ev promostate.Event
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			return states, fmt.Errorf("promo-state event %s: %w", m.Value, err)
		}
		fmt.Printf("promo-state  %-10s seq %d at %s\n", ev.State, ev.Seq, ev.OccurredAt)
		states = append(states, ev.State)
	}
	return states, nil
}
