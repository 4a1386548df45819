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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// groupReader is the sink's consumer-group member (franz-go's client). It fetches
// every partition a broker leads in one request, and buffers one fetch per broker
// until the sink takes it: the sink takes what has arrived a few times a batch
// window, so a fetch carries every event since the one before, of every
// partition. kafka-go's reader fetched each of the 16 partitions on its own, each
// as soon as its last fetch returned: at 4,000 events a second, a fetch per 1.35
// events, and those fetches were most of the sink's CPU.
type groupReader struct {
	opts []kgo.Opt
	log  *slog.Logger
	mu   sync.Mutex // cl, replaced when the topic was recreated (Fetch)
	cl   *kgo.Client
	// renewed is when Fetch last replaced the client.
	renewed time.Time
}

func newGroupReader(cfg Config, log *slog.Logger) (*groupReader, error) {
	if len(cfg.Brokers) == 0 || cfg.Group == "" || cfg.Topic == "" {
		return nil, fmt.Errorf("flow sink: brokers, group and topic are required (%v, %q, %q)", cfg.Brokers, cfg.Group, cfg.Topic)
	}
	g := &groupReader{log: log, opts: []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		// Offsets are committed by the sink alone, once MySQL holds the batch (Handle);
		// nothing is committed on a rebalance or on leaving.
		kgo.DisableAutoCommit(),
		// A new group reads everything Kafka still holds, and so does a member whose
		// offset the broker no longer has (a broker that lost its log): nothing
		// acknowledged is skipped.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// A fetch returns as soon as anything is there: the sooner an event is
		// stored, the less a broker that loses data (the local kfake) can lose
		// (kafka-go's reader waiting for 16 KiB per fetch doubled the lag).
		kgo.FetchMinBytes(1), kgo.FetchMaxWait(100 * time.Millisecond), kgo.FetchMaxBytes(10 << 20),
		// The eager protocols kafka-go's reader speaks too, so that members of both
		// kinds share the group while a deployment rolls.
		kgo.Balancers(kgo.RangeBalancer(), kgo.RoundRobinBalancer()),
		kgo.HeartbeatInterval(time.Second), kgo.SessionTimeout(10 * time.Second), kgo.RebalanceTimeout(10 * time.Second),
		// After a lost coordinator (a broker restart) the group is rejoined within a
		// second: for the seconds of a longer backoff nothing reaches MySQL.
		kgo.RetryBackoffFn(func(n int) time.Duration { return min(50*time.Millisecond<<min(n, 5), time.Second) }),
		// New partitions of the topic are seen within seconds.
		kgo.MetadataMaxAge(5 * time.Second),
		kgo.WithLogger(kgoLogger{log}),
		kgo.MaxVersions(byName()),
		kgo.DisableClientMetrics(), // no telemetry pushed to the broker
	}}
	var err error
	if g.cl, err = kgo.NewClient(g.opts...); err != nil {
		return nil, fmt.Errorf("flow sink: %w", err)
	}
	return g, nil
}

// byName caps the offset requests at the last versions that name a topic by its
// name: to OffsetCommit v10, which names it by its id, the local broker (kfake)
// answered UNKNOWN_TOPIC_ID for the topic it had just described, so no offset was
// ever committed.
func byName() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.OffsetCommit.Int16(), 9)
	v.SetMaxKeyVersion(kmsg.OffsetFetch.Int16(), 9)
	return v
}

func (g *groupReader) client() *kgo.Client {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cl
}

// renew replaces the client by a new one, which joins the group afresh: the way
// to consume a topic that was deleted and created again (a broker that lost its
// log, as the local one restarted in memory does), since the client refuses the
// new topic's id.
func (g *groupReader) renew(old *kgo.Client) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cl != old {
		return nil
	}
	cl, err := kgo.NewClient(g.opts...)
	if err != nil {
		return err
	}
	old.Close()
	g.cl = cl
	return nil
}

// Fetch appends to batch up to max of the messages fetched. With wait it waits,
// until ctx ends, for at least one; without, it takes what is there and returns.
// It returns io.EOF once the client is closed.
func (g *groupReader) Fetch(ctx context.Context, batch []kafka.Message, max int, wait bool) ([]kafka.Message, error) {
	var pctx context.Context // nil: what is buffered, at once
	if wait {
		pctx = ctx
	}
	cl := g.client()
	fs := cl.PollRecords(pctx, max)
	var err error
	recreated := false
	fs.EachError(func(topic string, partition int32, e error) {
		switch {
		case errors.Is(e, kgo.ErrClientClosed):
			e = io.EOF
		case errors.Is(e, kerr.UnknownTopicID) || errors.Is(e, kerr.GroupIDNotFound):
			recreated = true
			e = fmt.Errorf("fetch %s/%d: %w", topic, partition, e)
		case errors.Is(e, context.Canceled) || errors.Is(e, context.DeadlineExceeded):
		default:
			e = fmt.Errorf("fetch %s/%d: %w", topic, partition, e)
		}
		err = errors.Join(err, e)
	})
	if recreated && time.Since(g.renewed) > time.Second {
		g.renewed = time.Now()
		g.log.Warn("the broker lost the flow topic or the group (a broker that lost its log?); joining the group afresh", "err", err.Error())
		if rerr := g.renew(cl); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	fs.EachRecord(func(r *kgo.Record) {
		batch = append(batch, kafka.Message{Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset,
			Key: r.Key, Value: r.Value, Time: r.Timestamp})
	})
	return batch, err
}

// Commit commits, for each partition of msgs, the offset past its last message,
// and returns once the group coordinator has answered.
func (g *groupReader) Commit(ctx context.Context, msgs []kafka.Message) error {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, m := range msgs {
		t := offsets[m.Topic]
		if t == nil {
			t = map[int32]kgo.EpochOffset{}
			offsets[m.Topic] = t
		}
		if at, ok := t[int32(m.Partition)]; !ok || at.Offset < m.Offset+1 {
			t[int32(m.Partition)] = kgo.EpochOffset{Epoch: -1, Offset: m.Offset + 1}
		}
	}
	var err error
	g.client().CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, e error) {
		if e != nil {
			err = e
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
					err = errors.Join(err, fmt.Errorf("commit %s/%d: %w", t.Topic, p.Partition, e))
				}
			}
		}
	})
	return err
}

// Close leaves the group (committing nothing) and closes the connections.
func (g *groupReader) Close() error {
	g.client().Close()
	return nil
}

// kgoLogger hands the client's warnings and errors to the sink's log.
type kgoLogger struct{ log *slog.Logger }

func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	if level == kgo.LogLevelError {
		lvl = slog.LevelError
	}
	l.log.Log(context.Background(), lvl, "kafka consumer: "+msg, keyvals...)
}
