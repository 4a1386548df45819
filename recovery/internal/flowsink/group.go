package flowsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
)

// groupReader is the sink's member of its consumer group: kafka-go's
// ConsumerGroup keeps membership, assignments, heartbeats and offset commits, and
// the member fetches every partition a broker leads for it in one request, only
// when the sink asks, so a batch costs a few fetches whatever the rate (why, and
// the measurement: docs/design.md, "Record and recovery"). It is used by the
// sink's goroutine alone; only the group runs goroutines of its own.
type groupReader struct {
	group     *kafka.ConsumerGroup
	client    *kafka.Client // metadata and offsets; its transport also fetches
	transport *kafka.Transport
	topic     string
	log       *slog.Logger
	skipLost  bool                            // Config.SkipLost
	onLost    func(partition int, lost int64) // Config.OnLost
	// windowMinBytes is what a window's fetch waits for before the window closes.
	windowMinBytes int

	gen     *kafka.Generation
	ended   chan struct{}   // closed when gen ends
	offsets map[int]int64   // the next offset to fetch, by partition of gen's assignment
	leaders map[int][]int   // gen's partitions by the broker leading them; nil: to look up
	buf     []kafka.Message // fetched, in each partition's order; taken up to next
	next    int
}

const (
	// longPoll is how long a fetch for a batch's first message waits at the broker
	// for anything to arrive; an idle sink sends one per longPoll.
	longPoll = 500 * time.Millisecond
	// requestTimeout bounds a request beyond its wait at the broker: a hung broker
	// becomes a fetch error, which the sink retries.
	requestTimeout = 10 * time.Second
	// minEventBytes is less than any flow event takes on the wire: MaxBatch of them
	// is the batch's worth a window's fetch waits for.
	minEventBytes = 256
	// fetchBackoffMin and fetchBackoffMax bound the wait after a failed fetch.
	fetchBackoffMin = 100 * time.Millisecond
	fetchBackoffMax = time.Second
	// partitionMaxBytes and fetchMaxBytes bound a fetch's answer: a few batches of
	// a backlog. kafka-go holds each record batch of an answer in a 64 KiB page
	// until its records are copied out, so a larger answer costs more than it saves.
	partitionMaxBytes = 256 << 10
	fetchMaxBytes     = 2 << 20
)

func newGroupReader(cfg Config, log *slog.Logger) (*groupReader, error) {
	gc := kafka.ConsumerGroupConfig{
		ID: cfg.Group, Brokers: cfg.Brokers, Topics: []string{cfg.Topic},
		Dialer: cfg.Auth.Dialer(10 * time.Second),
		// A new group reads everything Kafka still holds: nothing acknowledged is skipped.
		StartOffset:       kafka.FirstOffset,
		HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
		// After a lost coordinator (a broker restart) the group is rejoined within a
		// second, not kafka-go's default 5 s during which nothing reaches MySQL.
		JoinGroupBackoff:      time.Second,
		WatchPartitionChanges: true,
		ErrorLogger: kafka.LoggerFunc(func(format string, args ...any) {
			log.Warn("kafka group", "msg", fmt.Sprintf(format, args...))
		}),
	}
	// kafka-go refuses a bad config only when it starts; check first so bad flags are an error.
	if err := gc.Validate(); err != nil {
		return nil, err
	}
	group, err := kafka.NewConsumerGroup(gc)
	if err != nil {
		return nil, err
	}
	transport := cfg.Auth.Transport(nil)
	return &groupReader{
		group: group, transport: transport, topic: cfg.Topic, log: log, skipLost: cfg.SkipLost, onLost: cfg.OnLost,
		client:         &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: transport, Timeout: requestTimeout},
		windowMinBytes: cfg.MaxBatch * minEventBytes,
	}, nil
}

// FetchMessage returns the next message of the assignment. Without a deadline on
// ctx it waits for one, retrying failed fetches as kafka-go's Reader does (100 ms
// doubling to 1 s), so the sink resumes within a second of the broker's return;
// with one (the batch's window) it fetches at most until then and returns a
// failure at once.
func (r *groupReader) FetchMessage(ctx context.Context) (kafka.Message, error) {
	_, window := ctx.Deadline()
	for fails := 0; r.next == len(r.buf); {
		err := r.fill(ctx)
		switch {
		case err == nil:
			fails = 0
			continue
		case window || ctx.Err() != nil || errors.Is(err, io.EOF):
			return kafka.Message{}, err
		}
		wait := min(fetchBackoffMin<<fails, fetchBackoffMax)
		fails++
		r.log.Warn("kafka fetch failed; retrying", "attempt", fails, "retryIn", wait.String(), "err", err.Error())
		select {
		case <-ctx.Done():
			return kafka.Message{}, ctx.Err()
		case <-time.After(wait):
		}
	}
	m := r.buf[r.next]
	r.buf[r.next] = kafka.Message{}
	r.next++
	return m, nil
}

// CommitMessages commits the offsets after msgs, by the current generation (joined
// first if the one msgs came in has ended, as kafka-go's Reader commits).
func (r *groupReader) CommitMessages(ctx context.Context, msgs ...kafka.Message) error {
	next := map[int]int64{}
	for _, m := range msgs {
		next[m.Partition] = max(next[m.Partition], m.Offset+1)
	}
	if err := r.join(ctx); err != nil {
		return err
	}
	return r.gen.CommitOffsets(map[string]map[int]int64{r.topic: next})
}

// Close leaves the group.
func (r *groupReader) Close() error {
	err := r.group.Close()
	r.transport.CloseIdleConnections()
	return err
}

// join makes gen the group's current generation, waiting for the next if there is
// none or it has ended. A failed join is retried: the group waits between attempts.
func (r *groupReader) join(ctx context.Context) error {
	if r.gen != nil {
		select {
		case <-r.ended:
		default:
			return nil
		}
	}
	for {
		gen, err := r.group.Next(ctx)
		if err == nil {
			r.start(gen)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, kafka.ErrGroupClosed) {
			return io.EOF
		}
		r.log.Warn("kafka group join failed; retrying", "err", err.Error())
	}
}

// start takes gen's assignment; what was fetched in the generation before is
// dropped, and fetched again from the offsets committed.
func (r *groupReader) start(gen *kafka.Generation) {
	ended := make(chan struct{})
	gen.Start(func(ctx context.Context) {
		<-ctx.Done()
		close(ended)
	})
	clear(r.buf)
	r.gen, r.ended, r.buf, r.next, r.leaders = gen, ended, r.buf[:0], 0, nil
	r.offsets = map[int]int64{}
	for _, a := range gen.Assignments[r.topic] {
		r.offsets[a.ID] = a.Offset
	}
}

// fill fetches into buf, once all of it is taken, what the assignment's partitions
// hold past their offsets.
func (r *groupReader) fill(ctx context.Context) error {
	r.buf, r.next = r.buf[:0], 0
	if err := r.join(ctx); err != nil {
		return err
	}
	if len(r.offsets) == 0 { // no partition for this member: wait for the next generation
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.ended:
			return nil
		}
	}
	wait, minBytes, parent := longPoll, 1, ctx
	if deadline, ok := ctx.Deadline(); ok {
		if wait = time.Until(deadline); wait < time.Millisecond {
			return context.DeadlineExceeded
		}
		// The answer comes as the window closes, and must not be dropped for coming
		// a moment after: the request is bounded by its own timeout instead.
		minBytes, parent = r.windowMinBytes, context.WithoutCancel(ctx)
	}
	fctx, cancel := context.WithTimeout(parent, wait+requestTimeout)
	defer cancel()
	if err := r.fetch(fctx, wait, minBytes); err != nil {
		// The broker may have gone and come back: kafka-go's transport would try
		// its connections to it one by one, each failing; start afresh instead.
		r.transport.CloseIdleConnections()
		r.leaders = nil // a leader may have moved: look them up again
		if len(r.buf) == 0 {
			return fmt.Errorf("fetch %s: %w", r.topic, err)
		}
		r.log.Warn("kafka fetch failed for some partitions", "err", err.Error())
	}
	return nil
}

// fetch sends one fetch request to each leader of the assignment's partitions.
func (r *groupReader) fetch(ctx context.Context, wait time.Duration, minBytes int) error {
	if err := r.resolve(ctx); err != nil {
		return err
	}
	if r.leaders == nil {
		if err := r.lookUpLeaders(ctx); err != nil {
			return err
		}
	}
	answers := make([]fetchAnswer, 0, len(r.leaders))
	for _, parts := range r.leaders {
		answers = append(answers, fetchAnswer{req: r.fetchRequest(parts, wait, minBytes)})
	}
	if len(answers) == 1 {
		answers[0].res, answers[0].err = r.transport.RoundTrip(ctx, r.client.Addr, answers[0].req)
	} else {
		var wg sync.WaitGroup
		for i := range answers {
			a := &answers[i]
			wg.Go(func() { a.res, a.err = r.transport.RoundTrip(ctx, r.client.Addr, a.req) })
		}
		wg.Wait()
	}
	var errs []error
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		errs = append(errs, r.take(ctx, a.res.(*fetch.Response)))
	}
	return errors.Join(errs...)
}

type fetchAnswer struct {
	req *fetch.Request
	res protocol.Message
	err error
}

func (r *groupReader) fetchRequest(parts []int, wait time.Duration, minBytes int) *fetch.Request {
	ps := make([]fetch.RequestPartition, len(parts))
	for i, p := range parts {
		ps[i] = fetch.RequestPartition{Partition: int32(p), CurrentLeaderEpoch: -1, FetchOffset: r.offsets[p],
			LogStartOffset: -1, PartitionMaxBytes: partitionMaxBytes}
	}
	return &fetch.Request{ReplicaID: -1, MaxWaitTime: int32(wait.Milliseconds()), MinBytes: int32(minBytes),
		MaxBytes: fetchMaxBytes, SessionID: -1, SessionEpoch: -1,
		Topics: []fetch.RequestTopic{{Topic: r.topic, Partitions: ps}}}
}

// take appends a fetch's records to buf and moves the offsets past them.
func (r *groupReader) take(ctx context.Context, res *fetch.Response) error {
	var errs []error
	for _, t := range res.Topics {
		for _, p := range t.Partitions {
			part := int(p.Partition)
			next, ok := r.offsets[part]
			switch {
			case !ok || t.Topic != r.topic:
				continue
			case p.ErrorCode == int16(kafka.OffsetOutOfRange):
				errs = append(errs, r.outOfRange(ctx, part, next))
				continue
			case p.ErrorCode != 0:
				errs = append(errs, fmt.Errorf("partition %d: %w", part, kafka.Error(p.ErrorCode)))
				continue
			case p.RecordSet.Records == nil:
				continue
			}
			for {
				rec, err := p.RecordSet.Records.ReadRecord()
				if err != nil {
					if !errors.Is(err, io.EOF) {
						errs = append(errs, fmt.Errorf("partition %d at offset %d: %w", part, next, err))
					}
					break
				}
				if rec.Offset < next { // a record batch comes whole: skip what was taken
					release(rec)
					continue
				}
				m, err := message(r.topic, part, p.HighWatermark, rec)
				release(rec)
				if err != nil {
					errs = append(errs, fmt.Errorf("partition %d at offset %d: %w", part, rec.Offset, err))
					break
				}
				r.buf = append(r.buf, m)
				next = rec.Offset + 1
			}
			r.offsets[part] = next
		}
	}
	return errors.Join(errs...)
}

// message copies rec out of the fetch's buffer.
func message(topic string, partition int, highWater int64, rec *protocol.Record) (kafka.Message, error) {
	m := kafka.Message{Topic: topic, Partition: partition, Offset: rec.Offset, HighWaterMark: highWater, Time: rec.Time}
	var err error
	if m.Key, err = protocol.ReadAll(rec.Key); err != nil {
		return m, err
	}
	if m.Value, err = protocol.ReadAll(rec.Value); err != nil {
		return m, err
	}
	for _, h := range rec.Headers {
		m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: append([]byte(nil), h.Value...)})
	}
	return m, nil
}

// release hands the record's share of the fetch's buffer back to kafka-go's
// pool, from which the next fetch takes its buffers; without it every fetch
// allocated a 64 KiB page for each record batch it held.
func release(rec *protocol.Record) {
	if rec.Key != nil {
		rec.Key.Close()
	}
	if rec.Value != nil {
		rec.Value.Close()
	}
}

// ErrEventsLost: the group's offset is older than the partition's first, so
// events Kafka acknowledged were deleted (retention) before the sink stored them.
var ErrEventsLost = errors.New("flow events lost: the group's offset is past the partition's retention")

// outOfRange handles an offset the partition does not hold. One past the end
// waits for the log to grow. One before the first means events were lost: the
// sink refuses to go on past them (a rebuild would then sell what was granted)
// unless told to (SkipLost), and says so each time it is asked (OnLost, the log).
func (r *groupReader) outOfRange(ctx context.Context, part int, offset int64) error {
	res, err := r.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{r.topic: {kafka.FirstOffsetOf(part)}}})
	if err != nil {
		return fmt.Errorf("partition %d: offset %d out of range: %w", part, offset, err)
	}
	for _, p := range res.Topics[r.topic] {
		if p.Partition != part || p.Error != nil || offset >= p.FirstOffset {
			continue
		}
		lost := p.FirstOffset - offset
		r.onLost(part, lost)
		if !r.skipLost {
			r.log.Error("kafka deleted flow events the sink never stored; stopped at this partition until on-call decides (--skip-lost)",
				"partition", part, "offset", offset, "first", p.FirstOffset, "lost", lost)
			return fmt.Errorf("partition %d: %d events from offset %d: %w", part, lost, offset, ErrEventsLost)
		}
		r.log.Error("kafka deleted flow events the sink never stored; skipping them (--skip-lost)", "partition", part,
			"offset", offset, "first", p.FirstOffset, "lost", lost)
		r.offsets[part] = p.FirstOffset
		return nil
	}
	return fmt.Errorf("partition %d: offset %d: %w", part, offset, kafka.OffsetOutOfRange)
}

// resolve turns the assignment's relative offsets (a partition the group has
// committed nothing for starts at its first) into absolute ones.
func (r *groupReader) resolve(ctx context.Context) error {
	var req []kafka.OffsetRequest
	for p, o := range r.offsets {
		if o < 0 {
			req = append(req, kafka.OffsetRequest{Partition: p, Timestamp: o})
		}
	}
	if len(req) == 0 {
		return nil
	}
	res, err := r.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{r.topic: req}})
	if err != nil {
		return fmt.Errorf("list offsets of %s: %w", r.topic, err)
	}
	for _, p := range res.Topics[r.topic] {
		o, ok := r.offsets[p.Partition]
		switch {
		case !ok || o >= 0:
		case p.Error != nil:
			err = errors.Join(err, fmt.Errorf("list offsets of %s/%d: %w", r.topic, p.Partition, p.Error))
		case o == kafka.LastOffset:
			r.offsets[p.Partition] = p.LastOffset
		default:
			r.offsets[p.Partition] = p.FirstOffset
		}
	}
	return err
}

// lookUpLeaders groups the assignment's partitions by their leader: a fetch
// request goes to one broker.
func (r *groupReader) lookUpLeaders(ctx context.Context) error {
	md, err := r.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{r.topic}})
	if err != nil {
		return fmt.Errorf("metadata of %s: %w", r.topic, err)
	}
	leader := map[int]int{}
	for _, t := range md.Topics {
		if t.Name != r.topic {
			continue
		}
		if t.Error != nil {
			return fmt.Errorf("metadata of %s: %w", r.topic, t.Error)
		}
		for _, p := range t.Partitions {
			leader[p.ID] = p.Leader.ID
		}
	}
	leaders := map[int][]int{}
	for p := range r.offsets {
		l, ok := leader[p]
		if !ok {
			return fmt.Errorf("metadata of %s: no leader for partition %d", r.topic, p)
		}
		leaders[l] = append(leaders[l], p)
	}
	r.leaders = leaders
	return nil
}
