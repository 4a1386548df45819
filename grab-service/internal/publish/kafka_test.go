package publish

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/testenv"
)

func publishCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(16, flow.Topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster
}

// newEventID is an event id as the grab path makes them (grab/publisher.go).
func newEventID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func grabEvent(rid string) flow.Event {
	return flow.Event{EventID: newEventID(), Kind: flow.Grab, RequestID: rid, Pin: "p", IP: "10.0.0.1",
		Items: []flow.Item{{PromoID: "A", Type: 1, Num: 1}}, OccurredAt: flow.Stamp(time.Now())}
}

// topicEvent is one event read back from the flow topic.
type topicEvent struct {
	partition int
	key       string
	event     flow.Event
}

// readTopic reads every event of the flow topic's 16 partitions, in partition
// order, failing the test on an event that does not decode or that is not in the
// partition kafka-go's Hash balancer gives its key.
func readTopic(ctx context.Context, t *testing.T, cluster *kfake.Cluster) []topicEvent {
	t.Helper()
	ids := make([]int, 16)
	for i := range ids {
		ids[i] = i
	}
	var balancer kafka.Hash
	var out []topicEvent
	client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
	for part := range 16 {
		res, err := client.Fetch(ctx, &kafka.FetchRequest{Topic: flow.Topic, Partition: part, Offset: 0, MaxBytes: 16 << 20})
		if err != nil || res.Error != nil {
			t.Fatalf("fetch partition %d: %v %v", part, err, res.Error)
		}
		for {
			r, err := res.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("read partition %d: %v", part, err)
			}
			key, _ := io.ReadAll(r.Key)
			value, _ := io.ReadAll(r.Value)
			ev, err := flow.Decode(value)
			if err != nil {
				t.Fatalf("partition %d: event %q (key %q): %v", part, value, key, err)
			}
			if want := balancer.Balance(kafka.Message{Key: key}, ids...); want != part {
				t.Fatalf("%s in partition %d; the Hash balancer gives %d", key, part, want)
			}
			out = append(out, topicEvent{part, string(key), ev})
		}
	}
	return out
}

// Concurrent publishes batched across partitions: every event acknowledged is on
// the topic once, in the partition kafka-go's Hash balancer gives its requestId
// (as the Writer placed them before, so a request's GRAB and CANCEL share a
// partition across a rolling upgrade), and a request's events in the order sent.
func TestKafkaPublisherPlacesEveryEventByItsKey(t *testing.T) {
	t.Parallel()
	cluster := publishCluster(t)
	p := NewKafka(cluster.ListenAddrs(), 2*time.Millisecond, kafkaauth.Auth{})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const callers, each = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rid := fmt.Sprintf("r-%d-%d", c, i)
				grab, cancelEv := grabEvent(rid), grabEvent(rid)
				cancelEv.Kind = flow.Cancel
				if err := p.Publish(ctx, grab); err != nil {
					errs <- err
					return
				}
				if i%4 == 0 { // some requests are returned: their CANCEL follows the GRAB
					if err := p.Publish(ctx, cancelEv); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// One call holding events of several partitions (the reconciler's debts).
	var debts []flow.Event
	for i := range 40 {
		debts = append(debts, grabEvent(fmt.Sprintf("debt-%d", i)))
	}
	if err := p.Publish(ctx, debts...); err != nil {
		t.Fatal(err)
	}

	seen := map[string][]string{} // requestId -> kinds in topic order
	for _, e := range readTopic(ctx, t, cluster) {
		seen[e.event.RequestID] = append(seen[e.event.RequestID], string(e.event.Kind))
	}
	if want := callers*each + 40; len(seen) != want {
		t.Fatalf("%d requests on the topic; want %d", len(seen), want)
	}
	for c := range callers {
		for i := range each {
			rid, want := fmt.Sprintf("r-%d-%d", c, i), "GRAB"
			if i%4 == 0 {
				want = "GRAB CANCEL"
			}
			if got := fmt.Sprint(seen[rid]); got != "["+want+"]" {
				t.Fatalf("%s on the topic: %s; want [%s]", rid, got, want)
			}
		}
	}
}

// A broker that is gone fails the publish within its bounds (the grab then rolls
// back), a caller's deadline ends its wait, and a closed publisher refuses at once.
func TestKafkaPublisherFailsWithoutABroker(t *testing.T) {
	t.Parallel()
	cluster := publishCluster(t)
	p := NewKafka(cluster.ListenAddrs(), 2*time.Millisecond, kafkaauth.Auth{})
	ctx := context.Background()
	if err := p.Publish(ctx, grabEvent("before")); err != nil {
		t.Fatalf("publish with the broker up: %v", err)
	}
	cluster.Close()
	start := time.Now()
	if err := p.Publish(ctx, grabEvent("after")); err == nil {
		t.Fatal("publish with the broker gone: acknowledged")
	}
	// The publish gives up at publishTimeout; the room past it is for the goroutines
	// that tell the caller to be scheduled on a loaded machine (five times more under
	// the race detector's general run), far less than a publish that kept trying.
	if took, bound := time.Since(start), publishTimeout+testenv.Deadline(time.Second); took > bound {
		t.Fatalf("publish with the broker gone took %s; want within %s (its timeout %s)", took, bound, publishTimeout)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := p.Publish(short, grabEvent("deadline")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish past the caller's deadline: %v; want its deadline", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case <-done:
	case <-time.After(publishTimeout + testenv.Deadline(2*time.Second)):
		t.Fatal("Close did not return after the batches in flight ended")
	}
	if err := p.Publish(ctx, grabEvent("closed")); !errors.Is(err, errPublisherClosed) {
		t.Fatalf("publish after Close: %v; want errPublisherClosed", err)
	}
}

// A produce request whose connection drops is sent again, and the events the retry
// writes are whole. Found by the kafka drill: the first version reused the records
// of the failed attempt, whose key and value readers that attempt had consumed, so
// the retry had empty events acknowledged and the grants never reached the record.
func TestKafkaPublisherRetriesWholeEvents(t *testing.T) {
	t.Parallel()
	cluster := publishCluster(t)
	dropped := 0
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		dropped++
		return nil, errors.New("connection dropped by the test"), true // one produce request
	})
	p := NewKafka(cluster.ListenAddrs(), 2*time.Millisecond, kafkaauth.Auth{})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Publish(ctx, grabEvent("retried")); err != nil {
		t.Fatalf("publish once the dropped request is retried: %v", err)
	}
	if dropped != 1 {
		t.Fatalf("%d produce requests dropped; want the first", dropped)
	}
	events := readTopic(ctx, t, cluster) // a retry of empty events fails to decode here
	if len(events) != 1 || events[0].key != "retried" || events[0].event.RequestID != "retried" {
		t.Fatalf("topic holds %+v; want the whole GRAB of requestId retried, once", events)
	}
}

// One batch is sent at a time: a call that comes while a batch is being sent (the
// CANCEL of a caller that gave up waiting for its GRAB) goes in a later batch,
// sent only once the one before is done; the calls that come meanwhile share it;
// Close waits for the batch in flight and may be called twice.
func TestKafkaPublisherSendsOneBatchAtATime(t *testing.T) {
	t.Parallel()
	p := newKafka([]string{"127.0.0.1:1"}, time.Millisecond, kafkaauth.Auth{})
	sends := make(chan []*publishCall)
	release := make(chan struct{})
	p.send = func(batch []*publishCall) {
		sends <- batch
		<-release
		for _, c := range batch {
			c.done <- nil
		}
	}
	go p.batch()
	ctx := context.Background()
	published := make(chan string, 3)
	publish := func(rid string) {
		go func() {
			if err := p.Publish(ctx, grabEvent(rid)); err != nil {
				t.Error(err)
			}
			published <- rid
		}()
	}
	publish("grab")
	first := testenv.Recv(t, sends)
	if len(first) != 1 || string(first[0].msgs[0].Key) != "grab" {
		t.Fatalf("first batch %v; want the GRAB alone", first)
	}
	// The caller's deadline passes once its call is handed over, not after a time:
	// on a slow machine a 20 ms deadline could pass before the batcher took the
	// call, which then was never in the second batch.
	giveUp := deadlineAfterHandOver()
	if err := p.Publish(giveUp, grabEvent("grab")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a caller's deadline while its batch waits: %v", err)
	}
	publish("cancel")
	publish("other")
	select {
	case b := <-sends:
		t.Fatalf("a batch of %d calls was sent while the first was in flight", len(b))
	case <-time.After(100 * time.Millisecond):
	}
	release <- struct{}{}
	// The second batch: the GRAB whose caller gave up (handed over before its
	// deadline), then the two that came meanwhile, behind it.
	second := testenv.Recv(t, sends)
	if len(second) != 3 || string(second[0].msgs[0].Key) != "grab" {
		t.Fatalf("second batch %d calls, first %q; want 3, the given-up GRAB first", len(second), second[0].msgs[0].Key)
	}
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned with a batch in flight")
	case <-time.After(50 * time.Millisecond):
	}
	release <- struct{}{}
	testenv.Recv(t, closed)
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for range 3 {
		testenv.Recv(t, published)
	}
}

// Against three brokers a batch goes as one request per partition leader, and when
// every partition's leader moves (a failover) the publisher follows: publishes
// after the move are acknowledged within the batch deadline (the leaders read
// afresh, the Transport's metadata refreshed every second), and every event of both
// rounds is on the topic, in its Hash partition.
func TestKafkaPublisherFollowsLeadersAcrossBrokers(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(16, flow.Topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	leaders := map[int32]bool{}
	for part := range int32(16) {
		leaders[cluster.LeaderFor(flow.Topic, part)] = true
	}
	if len(leaders) < 2 {
		t.Fatalf("test set-up: the 16 partitions are led by %d broker(s); want several", len(leaders))
	}
	p := NewKafka(cluster.ListenAddrs(), 2*time.Millisecond, kafkaauth.Auth{})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	round := func(name string) {
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.Publish(ctx, grabEvent(fmt.Sprintf("%s-%d", name, i))); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}()
		}
		wg.Wait()
	}
	round("before")
	for part := range int32(16) { // every leader moves to the next broker
		if err := cluster.MoveTopicPartition(flow.Topic, part, (cluster.LeaderFor(flow.Topic, part)+1)%3); err != nil {
			t.Fatal(err)
		}
	}
	round("after")

	n := len(readTopic(ctx, t, cluster))
	if n != 200 {
		t.Fatalf("%d events on the topic; want the 200 acknowledged", n)
	}
}

// handedOver is a caller's context whose deadline passes as Publish has handed its
// call to the batcher and waits for the answer (its second look at Done), so the
// caller gives up while its call is queued behind the batch in flight, however long
// the hand-over took. Should Publish ever look at Done once only, the deadline
// passes a minute on instead: the test then waits, but cannot hang.
type handedOver struct {
	context.Context
	looks  atomic.Int32
	expire func()
	done   chan struct{}
}

func deadlineAfterHandOver() *handedOver {
	c := &handedOver{Context: context.Background(), done: make(chan struct{})}
	c.expire = sync.OnceFunc(func() { close(c.done) })
	time.AfterFunc(time.Minute, c.expire)
	return c
}

func (c *handedOver) Done() <-chan struct{} {
	if c.looks.Add(1) == 2 {
		c.expire()
	}
	return c.done
}

func (c *handedOver) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
