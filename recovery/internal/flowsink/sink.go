// Package flowsink is the flow sink: a Kafka consumer group on promo-grab-flow that
// writes GRAB and CANCEL events into MySQL's flow log (the system of record), a
// batch in one transaction (store.InsertFlows), committing its offsets only after
// that transaction commits. MySQL down, the batch is retried with bounded, jittered
// backoff, forever; writes are idempotent, so a redelivered batch changes nothing.
// A message that is not a flow event goes to the dead-letter topic.
package flowsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/recovery/internal/flowlag"
)

// DeadLetterTopic receives the messages the sink cannot decode.
const DeadLetterTopic = "promo-grab-flow-dlq"

// Record is the flow log as the sink writes it (store.Flows).
type Record interface {
	InsertFlows(ctx context.Context, events []flow.Event) (int, error)
}

// Config tunes the sink; Defaults are the numbers.
type Config struct {
	Brokers         []string
	Auth            kafkaauth.Auth // SASL and TLS (kafkaauth.FromEnv)
	Group           string
	Topic           string
	DeadLetterTopic string
	// MaxBatch and MaxWait close a batch: whichever comes first after its first message.
	MaxBatch int
	MaxWait  time.Duration
	// WriteTimeout bounds one attempt at MySQL: a hung server (not only a refusing
	// one) must turn into a retry rather than a stuck sink.
	WriteTimeout time.Duration
	// CommitAttempts bounds the retries of an offset commit. A commit that keeps
	// failing (the group rebalanced away) is given up: the events are stored, and
	// whoever owns the partition next gets them again, which changes nothing.
	CommitAttempts int
	Backoff        Backoff
	// SkipLost lets the sink go on past events Kafka deleted before it stored them
	// (its committed offset older than the partition's first, past retention). Off,
	// it stops consuming that partition, loudly, until on-call decides
	// (deploy/RUNBOOK.md, "Flow events lost to retention").
	SkipLost bool
	// OnLost hears of each such loss: the partition and the events gone.
	OnLost func(partition int, lost int64)
}

// Defaults are the production settings.
func Defaults() Config {
	return Config{
		Group: flowlag.DefaultGroup, Topic: flow.Topic, DeadLetterTopic: DeadLetterTopic,
		MaxBatch: 500, MaxWait: 50 * time.Millisecond, WriteTimeout: 10 * time.Second,
		CommitAttempts: 5, Backoff: Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second},
	}
}

// consumer is the group's side of the topic (*groupReader).
type consumer interface {
	FetchMessage(ctx context.Context) (kafka.Message, error)
	CommitMessages(ctx context.Context, msgs ...kafka.Message) error
	Close() error
}

// producer is the dead-letter topic's writer (*kafka.Writer).
type producer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
	Close() error
}

// Sink consumes the flow topic into the record.
type Sink struct {
	cfg    Config
	reader consumer
	dead   producer
	rec    Record
	m      *Metrics
	log    *slog.Logger
}

// New builds the sink; it starts joining the group at once.
func New(cfg Config, rec Record, m *Metrics, log *slog.Logger) (*Sink, error) {
	if cfg.MaxBatch < 1 || cfg.MaxWait <= 0 || cfg.Backoff.Min <= 0 || cfg.Backoff.Max < cfg.Backoff.Min {
		return nil, fmt.Errorf("flow sink: bad batch or backoff settings %+v", cfg)
	}
	if cfg.OnLost == nil {
		cfg.OnLost = func(part int, lost int64) {
			if m != nil {
				m.LostEvents.WithLabelValues(strconv.Itoa(part)).Set(float64(lost))
			}
		}
	}
	reader, err := newGroupReader(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("flow sink: %w", err)
	}
	return &Sink{
		cfg: cfg, rec: rec, m: m, log: log,
		reader: reader,
		dead: &kafka.Writer{
			Addr: kafka.TCP(cfg.Brokers...), Topic: cfg.DeadLetterTopic, Balancer: &kafka.Hash{}, Transport: cfg.Auth.Transport(nil),
			RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond,
			WriteTimeout: 5 * time.Second, MaxAttempts: 3, AllowAutoTopicCreation: true,
		},
	}, nil
}

// Close leaves the group and closes the dead-letter writer.
func (s *Sink) Close() error {
	return errors.Join(s.reader.Close(), s.dead.Close())
}

// Run consumes until ctx ends. A batch in progress at that moment is not
// committed; the group hands it out again and the record dedupes it.
func (s *Sink) Run(ctx context.Context) error {
	s.log.Info("flow sink consuming", "topic", s.cfg.Topic, "group", s.cfg.Group, "brokers", s.cfg.Brokers)
	fetchFails := 0
	for {
		batch, start, err := s.fetch(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, io.EOF):
			return errors.New("flow sink: kafka reader closed")
		case err != nil:
			s.m.Retries.WithLabelValues("fetch").Inc()
			wait := s.cfg.Backoff.delay(fetchFails)
			fetchFails++
			s.log.Warn("kafka fetch failed; retrying", "attempt", fetchFails, "retryIn", wait.String(), "err", err.Error())
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			continue
		}
		fetchFails = 0
		if err := s.Handle(ctx, batch); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.m.BatchLatency.Observe(time.Since(start).Seconds())
	}
}

// fetch waits for one message, then gathers more until MaxBatch or MaxWait.
func (s *Sink) fetch(ctx context.Context) ([]kafka.Message, time.Time, error) {
	first, err := s.reader.FetchMessage(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	start := time.Now()
	batch := []kafka.Message{first}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.MaxWait)
	defer cancel()
	for len(batch) < s.cfg.MaxBatch {
		m, err := s.reader.FetchMessage(wctx)
		if err != nil {
			// The window closed, or a fetch error that the next fetch reports again:
			// either way, store what we have.
			break
		}
		batch = append(batch, m)
	}
	return batch, start, nil
}

// Handle stores one batch and commits its offsets. It returns only when the batch
// is committed (or given up to a rebalance) or ctx ends.
func (s *Sink) Handle(ctx context.Context, batch []kafka.Message) error {
	s.m.BatchSize.Observe(float64(len(batch)))
	var events []flow.Event
	var dead []kafka.Message
	for _, m := range batch {
		e, err := flow.Decode(m.Value)
		if err != nil {
			dead = append(dead, s.deadLetter(m, err))
			continue
		}
		events = append(events, e)
	}
	poison, err := s.store(ctx, events)
	if err != nil {
		return err
	}
	dead = append(dead, poison...)
	if len(dead) > 0 {
		err := retry(ctx, s.cfg.Backoff, s.log, "dead-letter write", func() { s.m.Retries.WithLabelValues("dead_letter").Inc() },
			func(ctx context.Context) error { return s.dead.WriteMessages(ctx, dead...) })
		if err != nil {
			return err
		}
		s.m.DeadLetters.Add(float64(len(dead)))
		if err := s.recordDead(ctx, dead); err != nil {
			return err
		}
	}
	s.commit(ctx, batch)
	s.m.Consumed.Add(float64(len(batch)))
	return nil
}

// recordDead keeps the batch's dead letters in the record, retrying as the flow
// log's writes do: a rebuild must know of them before their offsets are committed.
func (s *Sink) recordDead(ctx context.Context, dead []kafka.Message) error {
	dl, ok := s.rec.(DeadLetterLog)
	if !ok {
		return nil
	}
	letters := lettersOf(dead)
	return retry(ctx, s.cfg.Backoff, s.log, "dead-letter record", func() { s.m.Retries.WithLabelValues("mysql").Inc() },
		func(ctx context.Context) error { return dl.RecordDeadLetters(ctx, letters) })
}

// store writes the events in one transaction, retrying until MySQL takes them. If
// MySQL refuses the data itself (a value too long for its column...), retrying
// cannot help: the events are then written one by one and those MySQL refuses are
// returned as dead letters, so one bad event does not stop the sink.
func (s *Sink) store(ctx context.Context, events []flow.Event) ([]kafka.Message, error) {
	if len(events) == 0 {
		return nil, nil
	}
	err := s.write(ctx, events)
	if !isDataError(err) {
		return nil, err
	}
	s.log.Warn("MySQL refused a batch's data; writing its events one by one", "events", len(events), "err", err.Error())
	var dead []kafka.Message
	for _, e := range events {
		err := s.write(ctx, []flow.Event{e})
		switch {
		case isDataError(err):
			b, _ := jsonEvent(e)
			dead = append(dead, s.deadLetter(kafka.Message{Topic: s.cfg.Topic, Partition: -1, Offset: -1, Key: []byte(e.RequestID), Value: b}, err))
		case err != nil:
			return nil, err
		}
	}
	return dead, nil
}

// write is one InsertFlows, retried while the failure is transient.
func (s *Sink) write(ctx context.Context, events []flow.Event) error {
	var dataErr error
	err := retry(ctx, s.cfg.Backoff, s.log, "flow log write", func() { s.m.Retries.WithLabelValues("mysql").Inc() },
		func(ctx context.Context) error {
			wctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
			defer cancel()
			n, err := s.rec.InsertFlows(wctx, events)
			if err == nil {
				s.m.RowsWritten.Add(float64(n))
			}
			if isDataError(err) {
				dataErr = err
				return nil // stop retrying: the caller splits the batch
			}
			return err
		})
	if err != nil {
		return err
	}
	return dataErr
}

// commit acknowledges the batch; see Config.CommitAttempts for why it may give up.
func (s *Sink) commit(ctx context.Context, batch []kafka.Message) {
	var err error
	for n := 0; n < s.cfg.CommitAttempts; n++ {
		if err = s.reader.CommitMessages(ctx, batch...); err == nil || ctx.Err() != nil {
			return
		}
		s.m.Retries.WithLabelValues("commit").Inc()
		wait := s.cfg.Backoff.delay(n)
		s.log.Warn("offset commit failed; retrying", "attempt", n+1, "retryIn", wait.String(), "err", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	s.log.Error("offset commit given up; the stored batch will be delivered again and change nothing",
		"messages", len(batch), "err", err.Error())
}

// OwedLog is the record's list of owed CANCELs (store.Flows, store/owed.go).
type OwedLog interface {
	SettleOwedCancels(ctx context.Context, keep time.Duration) (int, error)
}

// RunOwed writes into the flow log, at once and then every interval until ctx ends,
// the owed CANCELs whose GRAB the sink has stored since (the rebuild does it too):
// the record then agrees with Redis, which gave the take back, without waiting for
// Kafka, and holds the debt even if the shard holding it in Redis is lost. Copies
// older than keep go.
func (s *Sink) RunOwed(ctx context.Context, owed OwedLog, every, keep time.Duration) error {
	return svc.Every(ctx, every, func(ctx context.Context) {
		octx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
		n, err := owed.SettleOwedCancels(octx, keep)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("owed CANCELs not settled; next interval tries again", "err", err.Error())
		case n > 0:
			s.m.RowsWritten.Add(float64(n))
			s.log.Info("owed CANCELs written into the flow log", "rows", n)
		}
	})
}

// RunLag refreshes the lag gauge at once and then every interval until ctx ends.
func (s *Sink) RunLag(ctx context.Context, meter *flowlag.Meter, every time.Duration) error {
	return svc.Every(ctx, every, func(ctx context.Context) {
		mctx, cancel := context.WithTimeout(ctx, every)
		ps, err := meter.Partitions(mctx)
		cancel()
		if err == nil {
			s.m.Lag.Set(float64(flowlag.Total(ps)))
		} else if ctx.Err() == nil {
			s.log.Warn("consumer lag not measured", "err", err.Error())
		}
	})
}
