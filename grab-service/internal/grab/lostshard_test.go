package grab

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

// grabRecord answers the cancel path's fallback with one granted request.
type grabRecord struct {
	pin, ip string
	items   []flow.Item
}

func (r grabRecord) Granted(context.Context, string, string, int) (bool, error) { return true, nil }
func (r grabRecord) GrabItems(context.Context, string) (string, string, []flow.Item, error) {
	return r.pin, r.ip, r.items, nil
}

// A Redis shard that restarted empty answers NOT_FOUND for everything until the
// fence notices (one poll). Found by the Redis fault drill: in that window grabs were
// told NOT_FOUND for live promotions and buyers' cancels of granted grabs 404. Both
// must be UNAVAILABLE (retry) until the shard is rebuilt.
func TestLostShardAnswersUnavailableNotNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lost = 6
	c, shards, id, _, f := builtShardsWithPromotion(t, lost, nil)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec := grabRecord{pin: "p", ip: "1.1.1.1", items: []flow.Item{{PromoID: id, Type: 1, Num: 1, Shard: lost}}}
	svc, err := New(Defaults(), Deps{Shards: shards, Publisher: &grabtest.Publisher{}, Record: rec, Switches: configcenter.NewHolder(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: log, Fence: f})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if res, err := svc.Grab(ctx, Request{RequestID: "g1", Pin: "p", IP: "1.1.1.1", Items: []Item{{PromoID: id, Type: 1, Num: 1}}}); err != nil || res.Result != Granted {
		t.Fatalf("grab before the loss: %+v %v", res, err)
	}

	// The server comes back empty; the fence has not polled since.
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if f.Fenced(lost) {
		t.Fatal("test set-up: the fence must not have noticed yet")
	}
	for i := 0; i < 2; i++ { // twice: the first answer must not be cached as NOT_FOUND
		res, err := svc.Grab(ctx, Request{RequestID: "g2", Pin: "q", IP: "1.1.1.2", Items: []Item{{PromoID: id, Type: 1, Num: 1}}})
		if err != nil || res.Result != Unavailable {
			t.Fatalf("grab on a lost shard: %+v %v; want UNAVAILABLE, not NOT_FOUND", res, err)
		}
	}
	res, err := svc.Cancel(ctx, "g1", "p", "USER_CANCELLED")
	if err != nil || res.Result != Unavailable {
		t.Fatalf("cancel on a lost shard: %+v %v; want UNAVAILABLE, not 404", res, err)
	}

	// A shard that holds its marker is believed: a deleted promotion is NOT_FOUND.
	c.Set(ctx, promo.BuiltKey(lost), "built", 0)
	res, err = svc.Grab(ctx, Request{RequestID: "g3", Pin: "q", IP: "1.1.1.2", Items: []Item{{PromoID: id, Type: 1, Num: 1}}})
	if err != nil || res.Result != NotFound {
		t.Fatalf("grab of a missing promotion on a whole shard: %+v %v; want NOT_FOUND", res, err)
	}
	if _, err := svc.Cancel(ctx, "g1", "p", "USER_CANCELLED"); err != ErrGrabNotFound {
		t.Fatalf("cancel of an unknown grab on a whole shard: %v; want ErrGrabNotFound", err)
	}
}

// A two-item grab whose first item's shard comes back empty between the publish
// and the commit. Found by the Redis fault drill: the abort found no entry there,
// so no CANCEL was owed for that item, the record kept its GRAB, and the rebuild
// restored a grant the buyer had been told did not happen. The abort now publishes
// the CANCEL of every item it gave back at once, the lost one included, and
// finalizes the entries that owed it.
func TestAbortCancelsTakesALostShardForgot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, shards := privateShards(t)
	lostID, liveID := idOnShard(7), idOnShard(8)
	now := time.Now()
	for _, id := range []string{lostID, liveID} {
		if code, err := lua.Create(ctx, c, ring.Default.Shard(promo.Key(id, 1)), promo.Key(id, 1), lua.AdminSpec{Ver: 1, Total: 5, MaxPerGrab: 1,
			StartMs: now.Add(-time.Minute).UnixMilli(), EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE"}); err != nil || code != lua.AdminOK {
			t.Fatalf("create %s: %v %v", id, code, err)
		}
	}
	pub := &grabtest.Publisher{}
	lostKeys := promo.Keys(promo.Key(lostID, 1))
	svc, err := New(Defaults(), Deps{Shards: shards, Publisher: pub, Switches: configcenter.NewHolder(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Fault: func(point string) error {
			if point == "after-publish" { // the lost item's shard restarts empty
				return c.Del(ctx, lostKeys[:]...).Err()
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	res, err := svc.Grab(ctx, Request{RequestID: "two", Pin: "p", IP: "1.1.1.1",
		Items: []Item{{PromoID: lostID, Type: 1, Num: 1}, {PromoID: liveID, Type: 1, Num: 1}}})
	if err != nil || res.Result != Unavailable {
		t.Fatalf("grab: %+v %v; want UNAVAILABLE", res, err)
	}
	published := pub.Events()
	if len(published) != 2 || published[0].Kind != flow.Grab || published[1].Kind != flow.Cancel {
		t.Fatalf("published %+v; want the GRAB, then a CANCEL", published)
	}
	cancel := published[1]
	if cancel.Reason != "ROLLBACK" || len(cancel.Items) != 2 || cancel.Items[0].PromoID != lostID || cancel.Items[0].Shard != 7 ||
		cancel.Items[1].PromoID != liveID {
		t.Fatalf("CANCEL %+v; want the ROLLBACK of both items, the lost one first", cancel)
	}
	// The live item was committed before the abort: cancelled, and its CANCEL
	// acknowledged, so nothing is left owing in Redis.
	if e, ok, err := lua.ReadLedger(ctx, c, promo.Key(liveID, 1), "two"); err != nil || !ok || e.State != lua.LedgerReturned {
		t.Fatalf("live item's entry %+v (found %v, %v); want R", e, ok, err)
	}
}

// A grab whose shard dies after the publish cannot be committed nor given back:
// the reconciler will settle it by the record, which holds the GRAB, so the buyer
// must not be told that nothing was taken.
func TestUnfinishedRollbackSaysToAskAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.StartRedis(t, testenv.Volatile)
	c := srv.Client()
	shards := testenv.OneServer(c)
	id := idOnShard(4)
	now := time.Now()
	if code, err := lua.Create(ctx, c, 4, promo.Key(id, 1), lua.AdminSpec{Ver: 1, Total: 5, MaxPerGrab: 1,
		StartMs: now.Add(-time.Minute).UnixMilli(), EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE"}); err != nil || code != lua.AdminOK {
		t.Fatalf("create: %v %v", code, err)
	}
	cfg := Defaults() // the killed server refuses at once: its timeout is never waited out
	svc, err := New(cfg, Deps{Shards: shards, Publisher: &grabtest.Publisher{}, Switches: configcenter.NewHolder(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Fault: func(point string) error {
			if point == "after-publish" {
				srv.Kill()
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	res, err := svc.Grab(ctx, Request{RequestID: "r", Pin: "p", IP: "1.1.1.1", Items: []Item{{PromoID: id, Type: 1, Num: 1}}})
	if err != nil || res.Result != Unavailable || !strings.Contains(res.Message, "same requestId") {
		t.Fatalf("grab: %+v %v; want UNAVAILABLE telling the buyer to ask again", res, err)
	}
}

// A NOT_FOUND that comes back while a marker read is in flight must not take that
// read's answer: the read may have seen the server before it restarted empty. It
// waits for the next read, which it shares with every NOT_FOUND that came back
// meanwhile.
func TestMarkerReadsAnswerOnlyFromAReadStartedLater(t *testing.T) {
	t.Parallel()
	var m markerReads
	started := make(chan int, 4)
	release := make(chan bool, 4)
	reads := 0
	read := func() bool { // reads run one at a time: reads needs no lock
		reads++
		started <- reads
		return <-release
	}
	first := make(chan bool)
	go func() { first <- m.lost(read) }()
	if n := testenv.Recv(t, started); n != 1 {
		t.Fatalf("read %d started; want 1", n)
	}
	// Two NOT_FOUNDs come back while read 1 (of the server before the restart) is in flight.
	later := make(chan bool, 2)
	for range 2 {
		go func() { later <- m.lost(read) }()
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) { // a hang guard
		m.mu.Lock()
		joined := m.next != nil && m.next.waiters == 2
		m.mu.Unlock()
		if joined {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the two later callers did not wait for a next read within 30 s")
		}
	}
	release <- false // read 1: whole
	if lost := testenv.Recv(t, first); lost {
		t.Fatal("the first caller got lost; want read 1's answer, whole")
	}
	if n := testenv.Recv(t, started); n != 2 {
		t.Fatalf("read %d started; want 2", n)
	}
	release <- true // read 2: the server restarted empty
	for range 2 {
		if lost := testenv.Recv(t, later); !lost {
			t.Fatal("a caller that came back during read 1 took its answer; want read 2's, lost")
		}
	}
	select {
	case n := <-started:
		t.Fatalf("read %d started; the two later callers must share read 2", n)
	case <-time.After(50 * time.Millisecond):
	}
}

// A flood of grabs naming promotions that do not exist (each its own key, so the
// refusal cache never answers them) is answered NOT_FOUND with far fewer marker
// reads than grabs: without the coalescing every one read the markers and INFO.
func TestNotFoundFloodSharesMarkerReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, shards := privateShards(t)
	const shard, grabs = 9, 300
	for s := 0; s < ring.Shards; s++ {
		c.Set(ctx, promo.BuiltKey(s), "built", 0)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := NewFence(shards, func(context.Context) ([]string, error) { return nil, nil }, prometheus.NewRegistry(), log)
	f.Poll(ctx, pollWithin)
	svc, err := New(Defaults(), Deps{Shards: shards, Publisher: &grabtest.Publisher{}, Switches: configcenter.NewHolder(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: log, Fence: f})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	var ids []string
	for n := 0; len(ids) < grabs; n++ {
		if id := "nowhere-" + strconv.Itoa(n); ring.Default.Shard(promo.Key(id, 1)) == shard {
			ids = append(ids, id)
		}
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]Outcome, grabs)
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := svc.Grab(ctx, Request{RequestID: "flood-" + id, Pin: "p" + id, IP: "1.1.1.1", Items: []Item{{PromoID: id, Type: 1, Num: 1}}})
			if err != nil {
				t.Error(err)
			}
			results[i] = res.Result
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r != NotFound {
			t.Fatalf("grab %d of a promotion that does not exist: %s; want NOT_FOUND", i, r)
		}
	}
	markerReads := testenv.CommandCalls(t, c)["get"]
	if markerReads == 0 || markerReads > grabs/2 {
		t.Fatalf("%d marker reads for %d NOT_FOUND grabs; want them shared (at most %d)", markerReads, grabs, grabs/2)
	}
	t.Logf("%d marker reads for %d NOT_FOUND grabs", markerReads, grabs)
}

// A confirm never answers from a shard that came back empty. Its index entry, its
// hold and its ledger went with the server, and the record cannot tell whether the
// grant was confirmed, so until the rebuild the answer is UNAVAILABLE: not NOT_FOUND,
// and not a CONFIRMED the record never got.
func TestConfirmOnALostShardIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lost = 6
	c, shards, id, _, f := builtShardsWithPromotion(t, lost, nil)
	rec := grabRecord{pin: "p", ip: "1.1.1.1", items: []flow.Item{{PromoID: id, Type: 1, Num: 1, Shard: lost}}}
	pub := &grabtest.Publisher{}
	svc, err := New(Defaults(), Deps{Shards: shards, Publisher: pub, Record: rec, Switches: configcenter.NewHolder(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Fence: f})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	rid := "h"
	for n := 0; ring.Default.Shard(promo.RequestIndexKey(rid)) != lost; n++ { // its index and hold on the lost shard too
		rid = "h" + strconv.Itoa(n)
	}
	held := Request{RequestID: rid, Pin: "p", IP: "1.1.1.1", HoldSeconds: 600, Items: []Item{{PromoID: id, Type: 1, Num: 1}}}
	if res, err := svc.Grab(ctx, held); err != nil || res.Result != Granted {
		t.Fatalf("held grab before the loss: %+v %v", res, err)
	}
	if err := c.FlushAll(ctx).Err(); err != nil { // every shard of this private server
		t.Fatal(err)
	}
	if res, err := svc.Confirm(ctx, rid, "p"); err != nil || res.Result != Unavailable {
		t.Fatalf("confirm before the fence noticed the loss: %+v %v; want UNAVAILABLE", res, err)
	}
	f.Poll(ctx, pollWithin)
	if !f.Fenced(lost) {
		t.Fatal("test set-up: the fence must fence the lost shard now")
	}
	if res, err := svc.Confirm(ctx, rid, "p"); err != nil || res.Result != Unavailable {
		t.Fatalf("confirm while the shard is fenced: %+v %v; want UNAVAILABLE", res, err)
	}
	for _, e := range pub.Events() {
		if e.Kind == flow.Confirm {
			t.Fatalf("a CONFIRM was published from a lost shard: %+v", e)
		}
	}
}
