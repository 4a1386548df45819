// Package publish commits the grab path's flow events: Kafka writes them to the
// flow topic in batches, and Router, the publisher every grab uses, sends them to
// Kafka or, while the kafkaDegrade switch is on, straight into the MySQL flow log.
package publish

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/produce"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/kafkaauth"
)

// Kafka writes flow events to promo-grab-flow, batching across partitions: one
// produce request per partition leader (acks=all) for what arrives within the batch
// timeout, one batch at a time so an event never overtakes one published before it
// (docs/design.md, "Flow events batched across partitions").
type Kafka struct {
	brokers   []string
	auth      kafkaauth.Auth
	client    *kafka.Client
	linger    time.Duration
	calls     chan *publishCall
	closing   chan struct{}
	closeOnce sync.Once
	stopped   chan struct{}        // the batching loop and its last send ended
	send      func([]*publishCall) // writeBatch; a test's stand-in
	ready     *kafkaReady          // Ping's verdict (kafkaready.go)
}

// publishCall is one Publish waiting for its batch.
type publishCall struct {
	msgs []kafka.Message
	done chan error
}

// Bounds of a batch and of its write: maxBatchEvents flushes a batch early under
// heavy load; a batch is tried, every publishBackoff, until publishTimeout, which
// ends well inside the reconciler's margin.
const (
	maxBatchEvents = 2000
	publishTimeout = 2 * time.Second
	publishBackoff = 100 * time.Millisecond
)

var errPublisherClosed = errors.New("kafka publisher closed")

// NewKafka starts the publisher of the commit path. batchTimeout bounds
// how long a lone event waits for company.
func NewKafka(brokers []string, batchTimeout time.Duration, auth kafkaauth.Auth) *Kafka {
	p := newKafka(brokers, batchTimeout, auth)
	p.send = p.writeBatch
	go p.batch()
	return p
}

func newKafka(brokers []string, batchTimeout time.Duration, auth kafkaauth.Auth) *Kafka {
	// Leaders move in a failover, and kafka-go's Transport learns of it only by
	// its periodic metadata refresh: every second rather than its default 6 s, so a
	// moved partition fails grabs for at most about that long.
	transport := auth.Transport(&kafka.Transport{MetadataTTL: time.Second, MetadataTopics: []string{flow.Topic}})
	p := &Kafka{
		brokers: brokers, auth: auth,
		client:  &kafka.Client{Addr: kafka.TCP(brokers...), Transport: transport, Timeout: publishTimeout},
		linger:  batchTimeout,
		calls:   make(chan *publishCall),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
	}
	p.ready = newKafkaReady(p.dialBroker)
	return p
}

// Publish sends events and waits for the acknowledgement. An error may still mean
// the broker wrote some of them (the acknowledgement was lost): the callers' aborts
// publish a CANCEL for that reason.
func (p *Kafka) Publish(ctx context.Context, events ...flow.Event) error {
	c := &publishCall{msgs: make([]kafka.Message, len(events)), done: make(chan error, 1)}
	for i, e := range events {
		c.msgs[i] = kafka.Message{Key: []byte(e.RequestID), Value: e.AppendJSON(make([]byte, 0, 320)), Time: time.Now()}
	}
	select {
	case p.calls <- c:
	case <-p.closing:
		return errPublisherClosed
	case <-ctx.Done():
		return fmt.Errorf("publish %d flow events: %w", len(events), ctx.Err())
	}
	select {
	case err := <-c.done:
		if err != nil {
			return fmt.Errorf("publish %d flow events: %w", len(events), err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("publish %d flow events: %w", len(events), ctx.Err())
	}
}

// batch gathers calls into batches and sends them one at a time: a batch gathers
// for the linger after its first call and for as long as the batch before is being
// sent, so under load batches grow rather than queue.
func (p *Kafka) batch() {
	inFlight := make(chan struct{}) // closed when the batch in flight was sent
	close(inFlight)
	defer func() {
		<-inFlight
		close(p.stopped)
	}()
	for {
		var batch []*publishCall
		select {
		case c := <-p.calls:
			batch = append(batch, c)
		case <-p.closing:
			return
		}
		n := len(batch[0].msgs)
		linger := time.NewTimer(p.linger)
		lingered, sent, closing := false, inFlight, p.closing
		for !lingered || sent != nil {
			calls := p.calls
			if n >= maxBatchEvents {
				if sent == nil {
					break
				}
				calls = nil // full: take no more, wait for the batch in flight
			}
			select {
			case c := <-calls:
				batch, n = append(batch, c), n+len(c.msgs)
			case <-linger.C:
				lingered = true
			case <-sent:
				sent = nil
			case <-closing:
				lingered, closing = true, nil
			}
		}
		linger.Stop()
		done := make(chan struct{})
		inFlight = done
		go func() {
			defer close(done)
			p.send(batch)
		}()
	}
}

// writeBatch writes a batch and answers each of its calls. What a partition's
// leader refuses, or a connection loses, is sent again (with the leaders read
// afresh, as a failover moves them) until the batch's deadline; a call is answered
// by the partitions of its events.
func (p *Kafka) writeBatch(batch []*publishCall) {
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	var unsent map[int][]*kafka.Message // by partition, until acknowledged
	failed := map[int]error{}           // why each partition still unsent is
	for {
		ids, leaders, err := p.layout(ctx)
		switch {
		case err != nil && unsent == nil: // nothing placed: every call fails alike
			for _, c := range batch {
				c.done <- err
			}
			return
		case err != nil:
			for part := range unsent {
				failed[part] = err
			}
		default:
			if unsent == nil {
				unsent = place(batch, ids)
			}
			failed = p.produce(ctx, unsent, leaders)
			if len(failed) < len(unsent) {
				p.ready.acked()
			}
			for part := range unsent {
				if failed[part] == nil {
					delete(unsent, part)
				}
			}
		}
		if len(unsent) == 0 || sleepCtx(ctx, publishBackoff) != nil {
			break
		}
	}
	for _, c := range batch {
		var cerr error
		for _, m := range c.msgs {
			if err := failed[m.Partition]; err != nil && cerr == nil {
				cerr = fmt.Errorf("partition %d, not acknowledged within %s: %w", m.Partition, publishTimeout, err)
			}
		}
		c.done <- cerr
	}
}

// sleepCtx waits d, or less if ctx ends first (then its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// layout reads the topic's sorted partition ids and each one's leader (from the
// Transport's cached metadata).
func (p *Kafka) layout(ctx context.Context) ([]int, map[int]int, error) {
	meta, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{flow.Topic}})
	if err != nil {
		return nil, nil, fmt.Errorf("metadata of %s: %w", flow.Topic, err)
	}
	for _, t := range meta.Topics {
		if t.Name != flow.Topic {
			continue
		}
		if t.Error != nil || len(t.Partitions) == 0 {
			return nil, nil, fmt.Errorf("metadata of %s: no partitions (%v)", flow.Topic, t.Error)
		}
		ids := make([]int, 0, len(t.Partitions))
		leaders := map[int]int{}
		for _, part := range t.Partitions {
			ids = append(ids, part.ID)
			leaders[part.ID] = part.Leader.ID
		}
		slices.Sort(ids)
		return ids, leaders, nil
	}
	return nil, nil, fmt.Errorf("metadata of %s: no such topic", flow.Topic)
}

// place chooses every message's partition and groups the messages by partition.
func place(batch []*publishCall, ids []int) map[int][]*kafka.Message {
	var balancer kafka.Hash
	byPartition := map[int][]*kafka.Message{}
	for _, c := range batch {
		for i := range c.msgs {
			m := &c.msgs[i]
			m.Partition = balancer.Balance(*m, ids...)
			byPartition[m.Partition] = append(byPartition[m.Partition], m)
		}
	}
	return byPartition
}

// produce sends one produce request per leader, at once, and returns the error of
// every partition that was not acknowledged.
//
// The records are made afresh for every attempt: a record's key and value are
// readers, consumed by the attempt that wrote them, so a retry reusing them would
// send, and have acknowledged, empty events.
func (p *Kafka) produce(ctx context.Context, byPartition map[int][]*kafka.Message, leaders map[int]int) map[int]error {
	byLeader := map[int][]produce.RequestPartition{}
	for part, msgs := range byPartition {
		records := make([]protocol.Record, len(msgs))
		for i, m := range msgs {
			records[i] = protocol.Record{Time: m.Time, Key: protocol.NewBytes(m.Key), Value: protocol.NewBytes(m.Value)}
		}
		byLeader[leaders[part]] = append(byLeader[leaders[part]], produce.RequestPartition{
			Partition: int32(part), RecordSet: protocol.RecordSet{Records: protocol.NewRecordReader(records...)}})
	}
	var mu sync.Mutex
	failed := map[int]error{}
	var wg sync.WaitGroup
	for _, parts := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs := produceTo(ctx, p.client, parts)
			mu.Lock()
			defer mu.Unlock()
			maps.Copy(failed, errs)
		}()
	}
	wg.Wait()
	return failed
}

// produceTo sends parts (all led by one broker) in one request; it returns the
// error of each partition not acknowledged.
func produceTo(ctx context.Context, c *kafka.Client, parts []produce.RequestPartition) map[int]error {
	req := &produce.Request{Acks: int16(kafka.RequireAll), Timeout: int32(publishTimeout / time.Millisecond),
		Topics: []produce.RequestTopic{{Topic: flow.Topic, Partitions: parts}}}
	res, err := c.Transport.RoundTrip(ctx, c.Addr, req)
	if err == nil {
		err = errors.New("no acknowledgement in the produce response")
	}
	errs := map[int]error{}
	for _, part := range parts {
		errs[int(part.Partition)] = err
	}
	if res == nil {
		return errs
	}
	for _, t := range res.(*produce.Response).Topics {
		if t.Topic != flow.Topic {
			continue
		}
		for _, r := range t.Partitions {
			if r.ErrorCode == 0 {
				delete(errs, int(r.Partition))
			} else {
				errs[int(r.Partition)] = kafka.Error(r.ErrorCode)
			}
		}
	}
	return errs
}

// Close stops taking events, waits for the batch in flight and closes the
// connections. It may be called more than once.
func (p *Kafka) Close() error {
	p.closeOnce.Do(func() {
		close(p.closing)
		<-p.stopped
		p.client.Transport.(*kafka.Transport).CloseIdleConnections()
	})
	return nil
}

// Ping checks that the brokers answer (for /readyz): a recent acknowledgement
// says so, else a dial made at most once per readyDialEvery (kafkaReady).
func (p *Kafka) Ping(ctx context.Context) error { return p.ready.check(ctx) }

// dialBroker checks that a bootstrap broker takes a connection.
func (p *Kafka) dialBroker(ctx context.Context) error {
	var err error
	for _, b := range p.brokers {
		var conn *kafka.Conn
		if conn, err = p.auth.Dialer(time.Second).DialContext(ctx, "tcp", b); err == nil {
			return conn.Close()
		}
	}
	return fmt.Errorf("kafka: no broker answers: %w", err)
}
