package grab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
)

// Publisher commits flow events: Publish returns nil only once every event is
// acknowledged by the record (Kafka with acks=all, or MySQL while degraded).
type Publisher interface {
	Publish(ctx context.Context, events ...flow.Event) error
}

// KafkaPublisher writes flow events to promo-grab-flow with kafka-go, batching
// across partitions. kafka-go's Writer batches per partition: at the commit path's
// rates a partition rarely sees two events within a batch timeout, so nearly every
// event went to the broker as a produce request of its own. Here every event that
// arrives within batchTimeout of the first goes in one produce request per
// partition leader (acks=all), and each caller is answered by its partitions'
// outcome. Partitions are chosen as kafka-go's Hash balancer chooses them (the
// requestId key, over the sorted partition ids), so a request's events keep to one
// partition, in order, whichever version of the service sent them.
type KafkaPublisher struct {
	brokers []string
	client  *kafka.Client
	linger  time.Duration
	calls   chan *publishCall
	closing chan struct{}
	loop    sync.WaitGroup // the batching loop
	sending sync.WaitGroup // batches in flight
}

// publishCall is one Publish waiting for its batch.
type publishCall struct {
	msgs []kafka.Message
	done chan error
}

// Bounds of a batch and of its write: maxBatchEvents flushes a batch early under
// heavy load; a batch is tried publishAttempts times within publishTimeout, which
// ends well inside the reconciler's margin (an event still being retried could
// otherwise land after its own CANCEL).
const (
	maxBatchEvents  = 2000
	publishAttempts = 2
	publishTimeout  = 2 * time.Second
	publishBackoff  = 50 * time.Millisecond
)

var errPublisherClosed = errors.New("kafka publisher closed")

// NewKafkaPublisher starts the publisher of the commit path. batchTimeout bounds
// how long a lone event waits for company.
func NewKafkaPublisher(brokers []string, batchTimeout time.Duration) *KafkaPublisher {
	p := &KafkaPublisher{
		brokers: brokers,
		client:  &kafka.Client{Addr: kafka.TCP(brokers...), Transport: &kafka.Transport{}, Timeout: publishTimeout},
		linger:  batchTimeout,
		calls:   make(chan *publishCall),
		closing: make(chan struct{}),
	}
	p.loop.Add(1)
	go p.batch()
	return p
}

// Publish sends events and waits for the acknowledgement. An error may still mean
// the broker wrote some of them (the acknowledgement was lost): the callers' aborts
// publish a CANCEL for that reason.
func (p *KafkaPublisher) Publish(ctx context.Context, events ...flow.Event) error {
	c := &publishCall{msgs: make([]kafka.Message, len(events)), done: make(chan error, 1)}
	for i, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode %s event %s: %w", e.Kind, e.RequestID, err)
		}
		c.msgs[i] = kafka.Message{Key: []byte(e.RequestID), Value: b, Time: time.Now()}
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

// batch gathers the calls that arrive within linger of the first into one batch,
// and sends each batch in the background while the next one gathers.
func (p *KafkaPublisher) batch() {
	defer p.loop.Done()
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
	gather:
		for n < maxBatchEvents {
			select {
			case c := <-p.calls:
				batch, n = append(batch, c), n+len(c.msgs)
			case <-linger.C:
				break gather
			case <-p.closing:
				break gather
			}
		}
		linger.Stop()
		p.sending.Add(1)
		go func() {
			defer p.sending.Done()
			p.send(batch)
		}()
	}
}

// send writes a batch and answers each of its calls.
func (p *KafkaPublisher) send(batch []*publishCall) {
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	byPartition, leaders, err := p.place(ctx, batch)
	failed := map[int]error{}
	if err == nil {
		for attempt := 1; attempt <= publishAttempts; attempt++ {
			if failed = p.produce(ctx, byPartition, leaders); len(failed) == 0 || attempt == publishAttempts {
				break
			}
			for part := range byPartition { // again, only what failed
				if failed[part] == nil {
					delete(byPartition, part)
				}
			}
			select {
			case <-time.After(publishBackoff):
			case <-ctx.Done():
			}
		}
	}
	for _, c := range batch {
		cerr := err
		for _, m := range c.msgs {
			if cerr == nil && failed[m.Partition] != nil {
				cerr = fmt.Errorf("partition %d: %w", m.Partition, failed[m.Partition])
			}
		}
		c.done <- cerr
	}
}

// place chooses every message's partition and groups the messages by partition;
// leaders maps each partition to its leader's broker id.
func (p *KafkaPublisher) place(ctx context.Context, batch []*publishCall) (map[int][]*kafka.Message, map[int]int, error) {
	meta, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{flow.Topic}})
	if err != nil {
		return nil, nil, fmt.Errorf("metadata of %s: %w", flow.Topic, err)
	}
	var topic *kafka.Topic
	for i := range meta.Topics {
		if meta.Topics[i].Name == flow.Topic {
			topic = &meta.Topics[i]
		}
	}
	if topic == nil || topic.Error != nil || len(topic.Partitions) == 0 {
		return nil, nil, fmt.Errorf("metadata of %s: no partitions (%v)", flow.Topic, topic)
	}
	ids := make([]int, 0, len(topic.Partitions))
	leaders := map[int]int{}
	for _, part := range topic.Partitions {
		ids = append(ids, part.ID)
		leaders[part.ID] = part.Leader.ID
	}
	slices.Sort(ids)
	var balancer kafka.Hash
	byPartition := map[int][]*kafka.Message{}
	for _, c := range batch {
		for i := range c.msgs {
			m := &c.msgs[i]
			m.Partition = balancer.Balance(*m, ids...)
			byPartition[m.Partition] = append(byPartition[m.Partition], m)
		}
	}
	return byPartition, leaders, nil
}

// produce sends one produce request per leader, at once, and returns the error of
// every partition that was not acknowledged.
//
// The records are made afresh for every attempt: a record's key and value are
// readers, consumed by the attempt that wrote them, so a retry reusing them would
// send, and have acknowledged, empty events.
func (p *KafkaPublisher) produce(ctx context.Context, byPartition map[int][]*kafka.Message, leaders map[int]int) map[int]error {
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
	errs := map[int]error{}
	for _, part := range parts {
		errs[int(part.Partition)] = err
		if err == nil {
			errs[int(part.Partition)] = errors.New("no acknowledgement in the produce response")
		}
	}
	if err != nil {
		return errs
	}
	for _, t := range res.(*produce.Response).Topics {
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

// Close stops taking events, waits for the batches in flight and closes the
// connections.
func (p *KafkaPublisher) Close() error {
	close(p.closing)
	p.loop.Wait()
	p.sending.Wait()
	p.client.Transport.(*kafka.Transport).CloseIdleConnections()
	return nil
}

// newEventID is unique per event; deduplication in the record is on
// (requestId, kind, promotion), so a re-sent event may carry a new id.
func newEventID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Ping checks that a bootstrap broker answers (for /readyz).
func (p *KafkaPublisher) Ping(ctx context.Context) error {
	var err error
	for _, b := range p.brokers {
		var conn *kafka.Conn
		if conn, err = (&kafka.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", b); err == nil {
			return conn.Close()
		}
	}
	return fmt.Errorf("kafka: no broker answers: %w", err)
}
