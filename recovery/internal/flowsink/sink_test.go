package flowsink_test

// Component tests of the flow sink: the local stack's redis-servers and a throwaway
// MariaDB database (or, for the outage, a MariaDB server of the test's own), and an
// in-process Kafka cluster per test.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/recovery/internal/flowlag"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
)

// sell runs grabs (and a cancel of every fifth grant) on keys from workers until
// stop is closed or n grabs per worker are done (n = 0: until stop).
func sell(t *testing.T, sale *rt.Sale, keys []string, workers, n int, pace time.Duration, stop <-chan struct{}) (granted, cancelled int64) {
	t.Helper()
	var g, c atomic.Int64
	var wg sync.WaitGroup
	suffix := testenv.Suffix()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := 0; n == 0 || i < n; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := keys[rand.IntN(len(keys))]
				rid := fmt.Sprintf("r-%s-%d-%d", suffix, w, i)
				pin, ip := fmt.Sprintf("pin-%d", rand.IntN(40)), fmt.Sprintf("10.0.0.%d", rand.IntN(20))
				ok, _, err := sale.Grab(ctx, rid, pin, ip, key, 1+int64(rand.IntN(2)))
				if err != nil {
					t.Errorf("grab %s: %v", rid, err)
					return
				}
				if ok {
					g.Add(1)
					if i%5 == 0 {
						num := int64(1)
						if h := rt.Take(t, sale.Shards[ring.Default.Shard(key)], key).Ledger[rid]; h.Num > 0 {
							num = h.Num
						}
						if ok, err := sale.Cancel(ctx, rid, pin, ip, key, num, "USER_CANCELLED"); err != nil {
							t.Errorf("cancel %s: %v", rid, err)
						} else if ok {
							c.Add(1)
						}
					}
				}
				if pace > 0 {
					time.Sleep(pace)
				}
			}
		}()
	}
	wg.Wait()
	return g.Load(), c.Load()
}

func caughtUp(t *testing.T, brokers []string, group string, timeout time.Duration) {
	t.Helper()
	if err := flowlag.NewMeter(brokers, kafkaauth.Auth{}, flow.Topic, group).WaitCaughtUp(context.Background(), timeout, 100*time.Millisecond); err != nil {
		t.Fatalf("sink group %s did not catch up: %v", group, err)
	}
}

// recordState is everything the sink writes, to compare before and after a redelivery.
type recordState struct {
	Rows, Grabs, Cancels, NoHash, NoReason int64
	Remaining                              string
}

func readRecord(t *testing.T, db *store.Store) recordState {
	t.Helper()
	var s recordState
	q := `SELECT COUNT(*), COALESCE(SUM(kind = 'GRAB'), 0), COALESCE(SUM(kind = 'CANCEL'), 0),
 COALESCE(SUM(kind = 'GRAB' AND body_hash = ''), 0), COALESCE(SUM(kind = 'CANCEL' AND reason = ''), 0) FROM grab_flow`
	if err := db.DB().QueryRow(q).Scan(&s.Rows, &s.Grabs, &s.Cancels, &s.NoHash, &s.NoReason); err != nil {
		t.Fatal(err)
	}
	if err := db.DB().QueryRow(`SELECT GROUP_CONCAT(CONCAT(promo_id, '=', remaining) ORDER BY promo_id) FROM promotion`).Scan(&s.Remaining); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRedeliveredEventsChangeNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	brokers, db := rt.KafkaAndStore(t)
	shards := rt.Shards(t, nil)
	suffix := testenv.Suffix()
	var keys []string
	for i, total := range []int64{300, 40} {
		keys = append(keys, rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: fmt.Sprintf("redeliver%d-%s", i, suffix), Total: total, PerPin: 6, PerIP: 30}))
	}
	sale := rt.NewSale(shards, brokers)
	defer sale.Close()
	// Two poison messages: not JSON, and JSON that is not a flow event.
	if err := rt.FlowWriter(t, brokers).WriteMessages(ctx, kafka.Message{Key: []byte("x"), Value: []byte("not json")},
		kafka.Message{Key: []byte("y"), Value: []byte(`{"eventId":"e1","kind":"REFUND","requestId":"r","items":[{"promoId":"p","type":1,"num":1}],"occurredAt":"2026-01-01T00:00:00.000Z"}`)}); err != nil {
		t.Fatal(err)
	}
	granted, cancelled := sell(t, sale, keys, 4, 80, 0, nil)
	if granted == 0 || cancelled == 0 {
		t.Fatalf("the sale granted %d and cancelled %d; want both > 0", granted, cancelled)
	}

	m, stop := rt.RunSink(t, brokers, "sink-a", db.Flows)
	caughtUp(t, brokers, "sink-a", 60*time.Second)
	stop()
	first := readRecord(t, db)
	if first.Grabs != granted || first.Cancels != cancelled {
		t.Fatalf("record holds %d GRAB and %d CANCEL rows; the sale granted %d and cancelled %d", first.Grabs, first.Cancels, granted, cancelled)
	}
	if first.NoHash != 0 || first.NoReason != 0 {
		t.Fatalf("%d GRAB rows lack a body hash and %d CANCEL rows a reason", first.NoHash, first.NoReason)
	}
	if have := testutil.ToFloat64(m.DeadLetters); have != 2 {
		t.Fatalf("dead letters: have %v, want 2", have)
	}
	if have := testutil.ToFloat64(m.RowsWritten); int64(have) != first.Rows {
		t.Fatalf("rows written metric %v, rows %d", have, first.Rows)
	}
	// The record keeps them too, by the promotion each names (none for the one that
	// is not JSON), so a rebuild of promotion p refuses until they are replayed.
	if dead, err := db.Rebuild.DeadLettered(ctx); err != nil || dead[store.ID{PromoID: "p", Type: 1}] != 1 || dead[store.ID{}] != 1 {
		t.Fatalf("dead letters in the record: %v (err %v); want 1 of promotion p_1 and 1 naming none", dead, err)
	}
	for _, key := range keys {
		rt.RecordAgrees(t, db.Rebuild, shards[ring.Default.Shard(key)], key)
	}

	// A second group is a redelivery of every event: the record must not move.
	m2, stop2 := rt.RunSink(t, brokers, "sink-b", db.Flows)
	caughtUp(t, brokers, "sink-b", 60*time.Second)
	stop2()
	if again := readRecord(t, db); again != first {
		t.Fatalf("redelivery changed the record:\nbefore %+v\nafter  %+v", first, again)
	}
	if have := testutil.ToFloat64(m2.RowsWritten); have != 0 {
		t.Fatalf("redelivery wrote %v rows, want 0", have)
	}

	// The dead letters are on the dead-letter topic, with why.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: DeadLetterTopicForTest, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		msg, err := r.ReadMessage(rctx)
		if err != nil {
			t.Fatalf("dead letter %d: %v", i, err)
		}
		if len(msg.Headers) == 0 || msg.Headers[0].Key != "flashsale-error" {
			t.Fatalf("dead letter %d has no error header: %+v", i, msg.Headers)
		}
	}
}

// DeadLetterTopicForTest is the dead-letter topic the sink writes to.
const DeadLetterTopicForTest = "promo-grab-flow-dlq"

// MariaDB is frozen (SIGSTOP) for 20 s while grabs flow; a MariaDB server of the
// test's own is used, since the machine's is shared by every test. Once it is back,
// the record must hold every grant and return: sums equal Redis (invariant 4).
func TestMySQLOutageLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes a MariaDB server for 20s")
	}
	t.Parallel()
	ctx := context.Background()
	maria := rt.StartMariaDB(t)
	db, err := store.Open(ctx, maria.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	kf := rt.Kafka(t)
	brokers := kf.ListenAddrs()
	shards := rt.Shards(t, nil)
	suffix := testenv.Suffix()
	var keys []string
	for i := 0; i < 3; i++ {
		keys = append(keys, rt.Create(t, db.Promotions, shards, rt.Spec{PromoID: fmt.Sprintf("outage%d-%s", i, suffix), Total: 100000, PerPin: 100000}))
	}
	sale := rt.NewSale(shards, brokers)
	defer sale.Close()
	m, _ := rt.RunSink(t, brokers, "sink-outage", db.Flows)

	stop := make(chan struct{})
	var granted, cancelled int64
	done := make(chan struct{})
	go func() {
		granted, cancelled = sell(t, sale, keys, 3, 0, 5*time.Millisecond, stop)
		close(done)
	}()
	time.Sleep(2 * time.Second)
	maria.Stop()
	frozen := time.Now()
	t.Log("MariaDB frozen")
	// Frozen for 20 s, and at least until the sink has had a write time out, so the
	// outage is exercised even when a loaded machine delays the sink's first batch.
	retried := func() bool { return testutil.ToFloat64(m.Retries.WithLabelValues("mysql")) > 0 }
	for time.Since(frozen) < 20*time.Second || (!retried() && time.Since(frozen) < 60*time.Second) {
		time.Sleep(100 * time.Millisecond)
	}
	maria.Resume()
	t.Log("MariaDB resumed")
	time.Sleep(2 * time.Second)
	close(stop)
	<-done

	caughtUp(t, brokers, "sink-outage", 90*time.Second)
	st := readRecord(t, db)
	if st.Grabs != granted || st.Cancels != cancelled {
		t.Fatalf("record holds %d GRAB and %d CANCEL rows; the sale granted %d and cancelled %d", st.Grabs, st.Cancels, granted, cancelled)
	}
	for _, key := range keys {
		rt.RecordAgrees(t, db.Rebuild, shards[ring.Default.Shard(key)], key)
	}
	if testutil.ToFloat64(m.Retries.WithLabelValues("mysql")) == 0 {
		t.Fatal("the sink never retried a MySQL write: the outage was not exercised")
	}
	t.Logf("granted %d, cancelled %d; mysql retries %v", granted, cancelled, testutil.ToFloat64(m.Retries.WithLabelValues("mysql")))
}

// An owed CANCEL (Kafka refused it while its GRAB was not in MySQL) is written into
// the log soon after the sink stores its GRAB, without a rebuild.
func TestSinkSettlesOwedCancels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	brokers, db := rt.Kafka(t).ListenAddrs(), rt.OpenStore(t)
	rt.RunSink(t, brokers, "sink-owed", db.Flows)
	suffix := testenv.Suffix()
	rid, promoID := "owed-"+suffix, "owed-promo-"+suffix
	grab := flow.Event{EventID: "g-" + suffix, Kind: flow.Grab, RequestID: rid, Pin: "p", IP: "10.0.0.1",
		Items: []flow.Item{{PromoID: promoID, Type: 1, Num: 2, Shard: 3}}, OccurredAt: flow.Stamp(time.Now()), BodyHash: "h"}
	cancel := grab
	cancel.EventID, cancel.Kind, cancel.Reason, cancel.BodyHash = "c-"+suffix, flow.Cancel, "ROLLBACK", ""
	if err := db.Flows.OweCancels(ctx, []flow.Event{cancel}); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: flow.Topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	b, _ := json.Marshal(grab)
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(rid), Value: b}); err != nil {
		t.Fatal(err)
	}
	testenv.Within(t, 20*time.Second, "the GRAB stored and netted by its owed CANCEL", func() bool {
		in, err1 := db.Flows.HasGrab(ctx, rid, promoID, 1)
		n, err2 := db.Flows.GrantedByRecord(ctx, promoID, 1)
		return err1 == nil && err2 == nil && in && n == 0
	})
}
