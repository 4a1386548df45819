// Package flowlag measures how far the flow sink's consumer group is behind the
// flow topic: the partitions' last offsets against the group's committed offsets.
// The sink exports it as its lag metric; rebuild and verify wait on it, so a grant
// that Kafka acknowledged but MySQL does not hold yet is never missed.
package flowlag

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/kafkaauth"
)

// DefaultGroup is the flow sink's consumer group id.
const DefaultGroup = "flashsale-flow-sink"

// Partition is one partition's position.
type Partition struct {
	ID int
	// First and Last are the partition's first retained offset and the offset the
	// next message will get; Last − First messages are held.
	First, Last int64
	// Committed is the group's next offset to read, or -1 when it committed none.
	Committed int64
}

// Lag is how many held messages the group has not committed.
func (p Partition) Lag() int64 {
	from := max(p.Committed, p.First)
	return max(p.Last-from, 0)
}

// Meter reads positions of one topic and one group.
type Meter struct {
	Client *kafka.Client
	Topic  string
	Group  string
}

// NewMeter talks to the given bootstrap brokers.
func NewMeter(brokers []string, auth kafkaauth.Auth, topic, group string) *Meter {
	return &Meter{Client: &kafka.Client{Addr: kafka.TCP(brokers...), Transport: auth.Transport(nil), Timeout: 5 * time.Second}, Topic: topic, Group: group}
}

// Partitions reads every partition's offsets and the group's commits.
func (m *Meter) Partitions(ctx context.Context) ([]Partition, error) {
	meta, err := m.Client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{m.Topic}})
	if err != nil {
		return nil, fmt.Errorf("kafka metadata of %s: %w", m.Topic, err)
	}
	if len(meta.Topics) != 1 || meta.Topics[0].Error != nil || len(meta.Topics[0].Partitions) == 0 {
		var terr error
		if len(meta.Topics) == 1 {
			terr = meta.Topics[0].Error
		}
		return nil, fmt.Errorf("kafka metadata of %s: topic not found: %v", m.Topic, terr)
	}
	var ids []int
	var reqs []kafka.OffsetRequest
	for _, p := range meta.Topics[0].Partitions {
		ids = append(ids, p.ID)
		reqs = append(reqs, kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
	}
	sort.Ints(ids)
	offs, err := m.Client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{m.Topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("kafka offsets of %s: %w", m.Topic, err)
	}
	byID := map[int]*Partition{}
	out := make([]Partition, len(ids))
	for i, id := range ids {
		out[i] = Partition{ID: id, Committed: -1}
		byID[id] = &out[i]
	}
	for _, po := range offs.Topics[m.Topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("kafka offsets of %s/%d: %w", m.Topic, po.Partition, po.Error)
		}
		if p := byID[po.Partition]; p != nil {
			p.First, p.Last = po.FirstOffset, po.LastOffset
		}
	}
	fetched, err := m.Client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: m.Group, Topics: map[string][]int{m.Topic: ids}})
	if err != nil {
		return nil, fmt.Errorf("kafka committed offsets of group %s: %w", m.Group, err)
	}
	if errors.Is(fetched.Error, kafka.GroupIdNotFound) {
		return out, nil // a group that never committed: Committed stays -1
	}
	if fetched.Error != nil {
		return nil, fmt.Errorf("kafka committed offsets of group %s: %w", m.Group, fetched.Error)
	}
	for _, fp := range fetched.Topics[m.Topic] {
		if fp.Error != nil {
			return nil, fmt.Errorf("kafka committed offset of group %s on %s/%d: %w", m.Group, m.Topic, fp.Partition, fp.Error)
		}
		if p := byID[fp.Partition]; p != nil {
			p.Committed = fp.CommittedOffset
		}
	}
	return out, nil
}

// Total is the lag summed over partitions.
func Total(ps []Partition) int64 {
	var n int64
	for _, p := range ps {
		n += p.Lag()
	}
	return n
}

// ErrBehind says the group did not reach the target in time.
var ErrBehind = errors.New("the flow sink has not consumed everything Kafka holds")

// WaitCaughtUp snapshots where every partition ends now and waits, polling, until
// the group has committed past all of it: then MySQL holds every flow event Kafka
// had acknowledged when the wait began. It gives up after timeout with ErrBehind
// (naming the partitions behind), or with the error that kept it from measuring.
func (m *Meter) WaitCaughtUp(ctx context.Context, timeout, poll time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	target, err := m.Partitions(ctx)
	if err != nil {
		return fmt.Errorf("could not read the flow topic's end offsets within %s: %w", timeout, err)
	}
	var behind []string // at the last successful measurement
	var lastErr error
	for {
		now, err := m.Partitions(ctx)
		if err == nil {
			if behind = Behind(target, now); len(behind) == 0 {
				return nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			if behind == nil {
				return fmt.Errorf("could not read the flow sink's position within %s: %w", timeout, lastErr)
			}
			return fmt.Errorf("%w within %s (group %s, topic %s): %s", ErrBehind, timeout, m.Group, m.Topic, strings.Join(behind, ", "))
		case <-time.After(poll):
		}
	}
}

// Behind lists, as "partition N: X messages", each partition of now whose group
// position has not reached target's last offset.
func Behind(target, now []Partition) []string {
	last := map[int]Partition{}
	for _, p := range target {
		last[p.ID] = p
	}
	var out []string
	for _, p := range now {
		t, ok := last[p.ID]
		if !ok {
			continue // a partition added since the snapshot held nothing then
		}
		if at := max(p.Committed, p.First); at < t.Last {
			out = append(out, fmt.Sprintf("partition %d: %d messages", p.ID, t.Last-at))
		}
	}
	return out
}

// Ping checks that one of the brokers accepts a connection (for /readyz).
func Ping(ctx context.Context, brokers []string) error {
	var err error
	for _, b := range brokers {
		var conn net.Conn
		if conn, err = (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", b); err == nil {
			return conn.Close()
		}
	}
	return fmt.Errorf("kafka: no broker answers: %w", err)
}
