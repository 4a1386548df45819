package recoverytest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/lua"
)

// Sale drives grabs and cancels the way grab-service does, on one promotion per
// request: take (q.lua), publish the GRAB with acks=all, then commit; a GRAB that
// is not acknowledged is aborted and its CANCEL (ROLLBACK) published. A cancel
// returns in Redis, publishes the CANCEL, then finalizes.
type Sale struct {
	Shards []redis.UniversalClient
	Writer *kafka.Writer
}

// NewSale writes to the flow topic of brokers.
func NewSale(shards []redis.UniversalClient, brokers []string) *Sale {
	return &Sale{Shards: shards, Writer: &kafka.Writer{
		Addr: kafka.TCP(brokers...), Topic: flow.Topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: 2 * time.Millisecond, MaxAttempts: 2,
		// No test stops the broker under a sale: this bound only decides how long a
		// loaded machine may take over an acknowledgement, and a grab whose publish
		// failed on it fails the tests that sell.
		WriteTimeout: 10 * time.Second,
	}}
}

// Close flushes the writer.
func (s *Sale) Close() error { return s.Writer.Close() }

// BodyHash is the test's body fingerprint (any stable function of the body will do).
func BodyHash(rid, pin, ip, key string, num int64) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%d", rid, pin, ip, key, num)))
	return hex.EncodeToString(h[:12])
}

// Grab answers whether num units of key were granted; code is q.lua's answer.
func (s *Sale) Grab(ctx context.Context, rid, pin, ip, key string, num int64) (bool, lua.Code, error) {
	shard := ring.Default.Shard(key)
	c := s.Shards[shard]
	now := time.Now()
	hash := BodyHash(rid, pin, ip, key, num)
	r, err := lua.Grab(ctx, c, lua.GrabCall{NowMs: now.UnixMilli(), DeadlineMs: now.Add(3 * time.Second).UnixMilli(),
		RequestID: rid, BodyHash: hash, Pin: pin, IP: ip, RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: num}}})
	if err != nil || r.Code != lua.CodeOK {
		return false, r.Code, err
	}
	id, typ, _ := promo.ParseKey(key)
	ev := flow.Event{EventID: eventID(), Kind: flow.Grab, RequestID: rid, Pin: pin, IP: ip,
		Items: []flow.Item{withEnvelope(flow.Item{PromoID: id, Type: typ, Num: num, Shard: shard}, r.Envelopes)}, OccurredAt: flow.Stamp(now), BodyHash: hash}
	if err := s.Publish(ctx, ev); err != nil {
		return false, r.Code, s.abort(ctx, c, ev, key)
	}
	code, err := lua.Commit(ctx, c, rid, []string{key})
	if err != nil || code != lua.CommitCommitted {
		return false, r.Code, fmt.Errorf("commit %s: %v %w", rid, code, err)
	}
	return true, r.Code, nil
}

func (s *Sale) abort(ctx context.Context, c redis.UniversalClient, ev flow.Event, key string) error {
	now := time.Now().UnixMilli()
	if _, err := lua.Return(ctx, c, lua.ReturnCall{RequestID: ev.RequestID, Mode: lua.ReturnAbort, NowMs: now, Keys: []string{key}}); err != nil {
		return err
	}
	cancel := ev
	cancel.EventID, cancel.Kind, cancel.Reason, cancel.BodyHash = eventID(), flow.Cancel, "ROLLBACK", ""
	if err := s.Publish(ctx, cancel); err != nil {
		return err
	}
	_, err := lua.Return(ctx, c, lua.ReturnCall{RequestID: ev.RequestID, Mode: lua.ReturnFinalize, NowMs: now, Keys: []string{key}})
	return err
}

// withEnvelope is the item with the parts an envelope pool's take (return) moved,
// as grab-service's events carry them; envs is the script's answer per item (nil
// when no item was a pool's).
func withEnvelope(it flow.Item, envs []lua.Envelope) flow.Item {
	if len(envs) > 0 && envs[0].IsPool() {
		it.Amount, it.Parts = envs[0].Amount, envs[0].Parts
	}
	return it
}

// Cancel returns a granted grab; it reports whether anything was returned.
func (s *Sale) Cancel(ctx context.Context, rid, pin, ip, key string, num int64, reason string) (bool, error) {
	shard := ring.Default.Shard(key)
	c := s.Shards[shard]
	now := time.Now()
	r, err := lua.Return(ctx, c, lua.ReturnCall{RequestID: rid, Pin: pin, Mode: lua.ReturnCancel, Reason: reason, NowMs: now.UnixMilli(), Keys: []string{key}})
	if err != nil || r.Code != lua.ReturnReturned {
		return false, err
	}
	id, typ, _ := promo.ParseKey(key)
	ev := flow.Event{EventID: eventID(), Kind: flow.Cancel, RequestID: rid, Pin: pin, IP: ip,
		Items: []flow.Item{withEnvelope(flow.Item{PromoID: id, Type: typ, Num: num, Shard: shard}, r.Envelopes)}, OccurredAt: flow.Stamp(now), Reason: reason}
	if err := s.Publish(ctx, ev); err != nil {
		return true, err
	}
	_, err = lua.Return(ctx, c, lua.ReturnCall{RequestID: rid, Mode: lua.ReturnFinalize, NowMs: now.UnixMilli(), Keys: []string{key}})
	return true, err
}

// Publish writes events to the flow topic, keyed by requestId.
func (s *Sale) Publish(ctx context.Context, events ...flow.Event) error {
	msgs := make([]kafka.Message, len(events))
	for i, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		msgs[i] = kafka.Message{Key: []byte(e.RequestID), Value: b}
	}
	return s.Writer.WriteMessages(ctx, msgs...)
}

func eventID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
