// Package promostate publishes the changes of a promotion's sale state on the
// promo-state topic, so the price system and the detail pages need not poll
// (docs/CONTRACT.md, "Promotion state events"). Whoever ran the script publishes
// its changes from its answer and clears them from the shard's outbox; what a
// crash or a Kafka outage leaves there the reconciler publishes (Sweep), with the
// same seq (docs/design.md, "Sale state changes").
package promostate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/promo"
)

// Topic is the topic of promotion state events; the message key is the promotion key.
const Topic = "promo-state"

// Event is the JSON value of a promo-state message.
type Event struct {
	PromotionKey string `json:"promotionKey"`
	PromoID      string `json:"promoId"`
	Type         int    `json:"type"`
	State        string `json:"state"`
	// Seq grows with every change of one promotion: a consumer applies an event only
	// when its seq is above the last it applied for the key (two instances may
	// publish two quick changes in either order, and a repeat has the same seq).
	Seq        int64  `json:"seq"`
	OccurredAt string `json:"occurredAt"`
}

// EventOf is the event of a change.
func EventOf(c promo.StateChange) Event {
	id, typ, _ := promo.ParseKey(c.Key)
	return Event{PromotionKey: c.Key, PromoID: id, Type: typ, State: c.State, Seq: c.Seq,
		OccurredAt: time.UnixMilli(c.AtMs).UTC().Format(time.RFC3339Nano)}
}

// Announcer publishes changes and clears them from their outbox.
type Announcer struct {
	outbox string
	due    DueFunc
	writer *kafka.Writer
	log    *slog.Logger
	events *prometheus.CounterVec
	queue  chan posted
	done   chan struct{}
	relay  RelayFunc
}

// RelayFunc hands a bucket's own change (IsBucketChange) to bucket 0 of its
// promotion (lua.RelayBucketState on that shard's server), which answers the
// sale's SOLD_OUT or RESTOCKED when every bucket is empty or one refills; it
// returns bucket 0's server and the changes made there, to publish.
type RelayFunc func(ctx context.Context, change promo.StateChange) (redis.Cmdable, []promo.StateChange, error)

// RelayBuckets makes the announcer relay buckets' own changes with relay. Call it
// before the first Announce. A bucket's change is never published: without a
// relay it stays in its outbox for an instance that relays.
func (a *Announcer) RelayBuckets(relay RelayFunc) { a.relay = relay }

// IsBucketChange reports whether a change is a bucket's own stock (BUCKET_EMPTY,
// BUCKET_FILLED: state.lua), for bucket 0 to hear rather than for consumers.
func IsBucketChange(c promo.StateChange) bool { return strings.HasPrefix(c.State, "BUCKET_") }

// posted is a script answer's changes, with the client of the shard whose outbox holds them.
type posted struct {
	c       redis.Cmdable
	changes []promo.StateChange
}

// queueSize bounds the changes waiting for the background publisher; beyond it a
// change waits in its outbox for the reconciler.
const queueSize = 1024

// DueFunc leases to the caller up to limit changes left in the outbox of c for
// graceMs or more (lua.StateDue: the script lives above internal/).
type DueFunc func(ctx context.Context, c redis.Scripter, outbox string, nowMs, graceMs int64, limit int) ([]promo.StateChange, error)

// New starts an announcer writing to brokers, clearing and sweeping (with due)
// the outbox key on each server (promo.StateOutboxKey but in tests); its metric
// is registered on reg.
func New(brokers []string, auth kafkaauth.Auth, outbox string, due DueFunc, reg prometheus.Registerer, log *slog.Logger) *Announcer {
	a := &Announcer{
		outbox: outbox,
		due:    due,
		writer: &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: Topic, Balancer: &kafka.Hash{}, Transport: auth.Transport(nil),
			RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond, WriteTimeout: 2 * time.Second},
		log: log,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flashsale", Subsystem: "promo_state",
			Name: "events_total", Help: "Promotion state changes by outcome: published, failed (left in the outbox), dropped (queue full; left in the outbox), relayed (a bucket's, to its bucket 0)."},
			[]string{"outcome"}),
		queue: make(chan posted, queueSize),
		done:  make(chan struct{}),
	}
	reg.MustRegister(a.events)
	go a.run()
	return a
}

// Announce publishes changes and removes them from the outbox of c (the server
// of the shard whose script made them); a bucket's own change is relayed to
// bucket 0 instead (RelayBuckets). On an error they stay in the outbox.
func (a *Announcer) Announce(ctx context.Context, c redis.Cmdable, changes []promo.StateChange) error {
	sale, buckets := a.split(changes)
	return errors.Join(a.publish(ctx, c, sale), a.relayAll(ctx, c, buckets))
}

// split parts the sale's changes from the buckets' to relay; without a relay a
// bucket's change is in neither, and stays in its outbox for an instance that relays.
func (a *Announcer) split(changes []promo.StateChange) (sale, buckets []promo.StateChange) {
	for _, ch := range changes {
		switch {
		case !IsBucketChange(ch):
			sale = append(sale, ch)
		case a.relay != nil:
			buckets = append(buckets, ch)
		}
	}
	return sale, buckets
}

// relayAll hands each bucket change to bucket 0 and publishes what bucket 0
// announced; a change is removed from the outbox of c once bucket 0 has it (what
// bucket 0 announced waits in bucket 0's outbox if its publication fails).
func (a *Announcer) relayAll(ctx context.Context, c redis.Cmdable, changes []promo.StateChange) error {
	var errs []error
	for _, ch := range changes {
		c0, sale, err := a.relay(ctx, ch)
		if err != nil {
			errs = append(errs, fmt.Errorf("relay %s to its bucket 0: %w", ch.Member, err))
			continue
		}
		a.events.WithLabelValues("relayed").Inc()
		errs = append(errs, a.publish(ctx, c0, sale))
		if err := c.ZRem(ctx, a.outbox, ch.Member).Err(); err != nil {
			errs = append(errs, fmt.Errorf("clear a relayed bucket change from the outbox: %w", err))
		}
	}
	return errors.Join(errs...)
}

// publish writes the sale's changes to Kafka and removes them from the outbox of c.
func (a *Announcer) publish(ctx context.Context, c redis.Cmdable, changes []promo.StateChange) error {
	if len(changes) == 0 {
		return nil
	}
	msgs := make([]kafka.Message, len(changes))
	members := make([]any, len(changes))
	for i, ch := range changes {
		value, err := json.Marshal(EventOf(ch))
		if err != nil {
			return fmt.Errorf("promotion state event of %s: %w", ch.Key, err)
		}
		msgs[i] = kafka.Message{Key: []byte(ch.Key), Value: value}
		members[i] = ch.Member
	}
	if err := a.writer.WriteMessages(ctx, msgs...); err != nil {
		a.events.WithLabelValues("failed").Add(float64(len(changes)))
		return fmt.Errorf("publish %d promotion state changes: %w", len(changes), err)
	}
	a.events.WithLabelValues("published").Add(float64(len(changes)))
	if err := c.ZRem(ctx, a.outbox, members...).Err(); err != nil {
		// Published: the reconciler publishes them again, with the same seq.
		return fmt.Errorf("clear %d published state changes from the outbox: %w", len(changes), err)
	}
	return nil
}

// Post hands changes to the background publisher without waiting: the grab path
// answers the buyer meanwhile. When the queue is full they wait in the outbox.
func (a *Announcer) Post(c redis.Cmdable, changes []promo.StateChange) {
	if len(changes) == 0 {
		return
	}
	select {
	case a.queue <- posted{c, changes}:
	default:
		a.events.WithLabelValues("dropped").Add(float64(len(changes)))
	}
}

func (a *Announcer) run() {
	defer close(a.done)
	for p := range a.queue {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if err := a.Announce(ctx, p.c, p.changes); err != nil {
			a.log.Warn("promotion state changes left for the reconciler", "err", err)
		}
		cancel()
	}
}

// StateSweepGrace is how long a change may wait in the outbox for its own
// publisher before the reconciler publishes it: well above a publish's time.
const StateSweepGrace = 5 * time.Second

// Sweep publishes the changes left in the outbox of one shard's server for
// StateSweepGrace or more, up to 500, and reports how many it published.
func (a *Announcer) Sweep(ctx context.Context, c redis.UniversalClient, now time.Time) (int, error) {
	changes, err := a.due(ctx, c, a.outbox, now.UnixMilli(), StateSweepGrace.Milliseconds(), 500)
	if err != nil {
		return 0, err
	}
	if err := a.Announce(ctx, c, changes); err != nil {
		return 0, err
	}
	return len(changes), nil
}

// Close publishes what was posted and stops.
func (a *Announcer) Close() error {
	close(a.queue)
	<-a.done
	return a.writer.Close()
}
