package grabtransport_test

// End-to-end tests of the on-call switches: each switch is published to a test
// Nacos server, applied by the instance through the real nacos-sdk-go client, and
// observed on the grab path over HTTP against the local stack's Redis and MySQL.
// "Within 1 s" is the contract's functional deadline: the effect is polled for
// with a 1 s deadline measured from the publish, never timed as performance.

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/configcenter/nacostest"
	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/grab-service/internal/publish"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

// switchesDoc is a switches document as on-call would publish it.
type switchesDoc struct {
	GrabEnabled       bool    `json:"grabEnabled"`
	KafkaDegrade      bool    `json:"kafkaDegrade"`
	DegradeRateFactor float64 `json:"degradeRateFactor"`
	// DegradeMaxPerSecond is left out (the default cap) when 0.
	DegradeMaxPerSecond float64                   `json:"degradeMaxPerSecond,omitempty"`
	MethodLimits        configcenter.MethodLimits `json:"methodLimits"`
	BlockedPromotions   []string                  `json:"blockedPromotions"`
	BlockedPins         []string                  `json:"blockedPins,omitempty"`
	BlockedIPs          []string                  `json:"blockedIps,omitempty"`
}

func normal() switchesDoc {
	return switchesDoc{GrabEnabled: true, DegradeRateFactor: 1, BlockedPromotions: []string{}}
}

// onCall publishes switches documents to the Nacos server the instance follows.
type onCall struct {
	t   *testing.T
	srv *nacostest.Server
	key nacostest.Key
	e   *env
}

// followNacos makes e follow a test Nacos server, as grab-service started with
// --nacos does, and waits until the first document is in force.
func (e *env) followNacos() *onCall {
	e.t.Helper()
	srv := nacostest.Start(e.t)
	// A namespace per test: the SDK limits reads of one key per process.
	oc := &onCall{t: e.t, srv: srv, key: nacostest.Key{Tenant: "grab-" + e.suffix, Group: configcenter.Group, DataID: configcenter.DataID}, e: e}
	cache, err := os.MkdirTemp("", "grab-nacos-cache-")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = os.RemoveAll(cache) })
	src := configcenter.NewNacosSource(configcenter.NacosConfig{Addr: srv.Addr(), Namespace: oc.key.Tenant, CacheDir: cache,
		LogDir: filepath.Join(os.TempDir(), "flashsale-nacos-test-log"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	first := oc.publish(normal())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- configcenter.Follow(ctx, src, e.switches, configcenter.NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("follow: %v", err)
		}
	})
	testenv.Within(e.t, 30*time.Second, "the first switches document in force", func() bool { return e.switches.Load().MD5 == first }) // a start-up: no 1 s bound
	return oc
}

// publish writes d to Nacos and returns its md5.
func (oc *onCall) publish(d switchesDoc) string {
	oc.t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		oc.t.Fatal(err)
	}
	if _, err := configcenter.Parse(b); err != nil {
		oc.t.Fatalf("test publishes an invalid document: %v", err)
	}
	oc.srv.Set(oc.key, string(b))
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// load grabs continuously from promotions until stopped, one unit per request,
// and tallies the answers per promotion.
type load struct {
	e       *env
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	granted map[string][]string // promotion -> requestIds answered GRANTED
	answers map[string]int      // "<status> <result>" -> count
	n       atomic.Int64
	// Requests sent after markNow, and those of them answered GRANTED, by promotion.
	mark         atomic.Int64
	sentAfter    atomic.Int64
	grantedAfter atomic.Int64
	afterByPromo map[string]int
}

func (e *env) startLoad(workers int, ids ...string) *load {
	l := &load{e: e, stop: make(chan struct{}), granted: map[string][]string{}, answers: map[string]int{}, afterByPromo: map[string]int{}}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				id := ids[i%len(ids)]
				n := l.n.Add(1)
				after := l.mark.Load() != 0
				rid := fmt.Sprintf("load-%d-%d", w, i)
				a := e.grab(grabBody(rid, fmt.Sprintf("pin-%d", n), fmt.Sprintf("10.9.%d.%d", n/250%250, n%250), id, 1))
				if after {
					l.sentAfter.Add(1)
				}
				l.mu.Lock()
				l.answers[fmt.Sprintf("%d %s", a.status, a.res.Result)]++
				if a.status == http.StatusOK && a.res.Result == grab.Granted {
					l.granted[id] = append(l.granted[id], e.rid(rid))
					if after {
						l.grantedAfter.Add(1)
						l.afterByPromo[id]++
					}
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// markNow makes later requests count as "sent after".
func (l *load) markNow() { l.mark.Store(1) }

// finish stops the load and waits for the requests in flight.
func (l *load) finish() {
	close(l.stop)
	l.wg.Wait()
}

// grantsAfter counts GRANTED answers for id to requests sent after markNow.
func (l *load) grantsAfter(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.afterByPromo[id]
}

func (l *load) grants(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.granted[id])
}

func (l *load) tally() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.answers {
		out[k] = v
	}
	return out
}

// settled checks the invariants once every answer is in: no oversell, and Redis
// holds exactly the grants the answers told of (nothing leaked).
func (e *env) settled(id string, total int64, grantedAnswers int) {
	e.t.Helper()
	h := e.hash(id)
	if h.Remaining < 0 || h.Remaining+int64(grantedAnswers) != total {
		e.t.Fatalf("%s: remaining %d + GRANTED answers %d != total %d", id, h.Remaining, grantedAnswers, total)
	}
}

// probe sends one grab for id and returns its answer.
func (e *env) probe(name, id string) answer {
	return e.grab(grabBody(name, "probe-"+name, "10.6.0.1", id, 1))
}

// grabEnabled=false: within 1 s of the publish every grab answers 503 DEGRADED at
// once and takes nothing; switched back on, grabs are granted again within 1 s.
func TestSwitchGrabEnabledFlipMidLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oc := e.followNacos()
	const total = 1_000_000
	id := e.promotion("flip-off", spec{total: total, maxPerGrab: 1})
	l := e.startLoad(8, id)
	testenv.Within(t, 30*time.Second, "the load under way", func() bool { return l.grants(id) >= 50 })

	off := normal()
	off.GrabEnabled = false
	oc.publish(off)
	probes, probeGrants := 0, 0
	testenv.Within(t, testenv.SwitchDeadline(), "grabs answer 503 DEGRADED", func() bool {
		probes++
		a := e.probe(fmt.Sprintf("off-%d", probes), id)
		if a.res.Result == grab.Granted {
			probeGrants++
		}
		return a.status == http.StatusServiceUnavailable && a.res.Result == grab.Degraded
	})
	l.markNow()
	testenv.Within(t, 30*time.Second, "grabs sent after the switch applied", func() bool { return l.sentAfter.Load() >= 8 })
	l.finish()
	if l.grantedAfter.Load() != 0 {
		t.Fatalf("after the switch applied: %d grabs sent, %d granted", l.sentAfter.Load(), l.grantedAfter.Load())
	}
	before := e.hash(id)
	for i := range 20 {
		if a := e.probe(fmt.Sprintf("off-more-%d", i), id); a.status != http.StatusServiceUnavailable || a.res.Result != grab.Degraded {
			t.Fatalf("grabs off: %d %s", a.status, a.raw)
		}
	}
	if after := e.hash(id); after != before {
		t.Fatalf("a DEGRADED grab touched the promotion: %+v -> %+v", before, after)
	}
	for answer := range l.tally() {
		if answer != "200 GRANTED" && answer != "503 DEGRADED" {
			t.Errorf("unexpected answer under load: %s", answer)
		}
	}
	granted := l.grants(id) + probeGrants
	e.settled(id, total, granted)
	if n := countEvents(e.pub.Events(), flow.Grab); n != granted {
		t.Fatalf("%d GRAB events for %d grants", n, granted)
	}

	oc.publish(normal())
	on := 0
	testenv.Within(t, testenv.SwitchDeadline(), "grabs granted again", func() bool {
		on++
		return e.probe(fmt.Sprintf("on-%d", on), id).res.Result == grab.Granted
	})
}

// blockedPromotions: within 1 s the blocked promotion answers 409 STOPPED without
// touching Redis while the others keep selling; unblocked, it sells again within 1 s.
func TestSwitchBlockPromotionMidLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oc := e.followNacos()
	const total = 1_000_000
	a, b := e.twoShards("block-a", "block-b", spec{total: total, maxPerGrab: 1}, spec{total: total, maxPerGrab: 1})
	l := e.startLoad(8, a, b)
	testenv.Within(t, 30*time.Second, "the load under way", func() bool { return l.grants(a) >= 30 && l.grants(b) >= 30 })

	blocked := normal()
	blocked.BlockedPromotions = []string{a + "_1"}
	oc.publish(blocked)
	probes, probeGrants := 0, 0
	testenv.Within(t, testenv.SwitchDeadline(), "the blocked promotion answers 409 STOPPED", func() bool {
		probes++
		r := e.probe(fmt.Sprintf("blk-%d", probes), a)
		if r.res.Result == grab.Granted {
			probeGrants++
		}
		return r.status == http.StatusConflict && r.res.Result == grab.Stopped
	})
	l.markNow()
	testenv.Within(t, 30*time.Second, "promotion b still selling", func() bool { return l.grantsAfter(b) >= 20 })
	l.finish()
	if n := l.grantsAfter(a); n != 0 {
		t.Fatalf("promotion a granted %d grabs sent after the block applied", n)
	}
	before := e.hash(a)
	r := e.probe("blk-ledger", a)
	if r.status != http.StatusConflict || r.res.Result != grab.Stopped {
		t.Fatalf("blocked: %d %s", r.status, r.raw)
	}
	key := promo.Key(a, 1)
	if _, found, err := lua.ReadLedger(context.Background(), e.shard(key), key, e.rid("blk-ledger")); err != nil || found {
		t.Fatalf("a STOPPED grab reached Redis: ledger entry found=%v err=%v", found, err)
	}
	if after := e.hash(a); after != before {
		t.Fatalf("a STOPPED grab touched the promotion: %+v -> %+v", before, after)
	}
	e.settled(a, total, l.grants(a)+probeGrants)
	e.settled(b, total, l.grants(b))

	oc.publish(normal())
	on := 0
	testenv.Within(t, testenv.SwitchDeadline(), "the unblocked promotion sells again", func() bool {
		on++
		return e.probe(fmt.Sprintf("unblk-%d", on), a).res.Result == grab.Granted
	})
}

// methodLimits are per-instance token buckets for grab and cancel, changed live.
func TestSwitchMethodLimitsLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oc := e.followNacos()
	const total = 100_000
	id := e.promotion("method", spec{total: total, maxPerGrab: 1})
	granted := 0
	var grantedRids []string
	// burst sends n grabs at once: the limiter answers at the door, so whether a
	// bucket of 5 a second refuses some cannot hinge on how long each grab takes
	// (sent one after another, grabs slower than 200 ms never met the limit).
	burst := func(prefix string, n int) (ok, limited int, took time.Duration) {
		start := time.Now()
		rids, answers := make([]string, n), make([]answer, n)
		var wg sync.WaitGroup
		for i := range n {
			rids[i] = fmt.Sprintf("%s-%d", prefix, i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = e.grab(grabBody(rids[i], "m-"+rids[i], "10.5.0.1", id, 1))
			}()
		}
		wg.Wait()
		took = time.Since(start)
		for i, a := range answers {
			switch {
			case a.res.Result == grab.Granted:
				ok++
				granted++
				grantedRids = append(grantedRids, rids[i])
			case a.status == http.StatusTooManyRequests && a.res.Result == grab.RateLimited:
				limited++
			default:
				t.Fatalf("grab %s: %d %s", rids[i], a.status, a.raw)
			}
		}
		return ok, limited, took
	}

	limits := normal()
	limits.MethodLimits.Grab = 5
	oc.publish(limits)
	round := 0
	testenv.Within(t, testenv.SwitchDeadline(), "the grab limit applied", func() bool {
		round++
		_, limited, _ := burst(fmt.Sprintf("lim%d", round), 5)
		return limited > 0
	})
	ok, limited, took := burst("limited", 40)
	// A bucket of 5 a second (burst 1) lets through at most 1 + 5 per elapsed second.
	if maxOK := 1 + int(5*took.Seconds()) + 1; ok > maxOK || limited == 0 {
		t.Fatalf("with grab limit 5/s: %d granted, %d limited in %v (at most %d may pass)", ok, limited, took, maxOK)
	}
	// A resend of a granted grab (its answer lost) is spared the limit: it answers
	// its grant, never a definite 429, though the bucket is empty.
	last := grantedRids[len(grantedRids)-1]
	if a := e.grab(grabBody(last, "m-"+last, "10.5.0.1", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("a resend of granted %s at the limit: %d %s, want the replay of its grant", last, a.status, a.raw)
	}

	limits.MethodLimits = configcenter.MethodLimits{Grab: 0, Cancel: 2}
	oc.publish(limits)
	round = 0
	testenv.Within(t, testenv.SwitchDeadline(), "the grab limit lifted", func() bool {
		round++
		_, limited, _ := burst(fmt.Sprintf("free%d", round), 10)
		return limited == 0
	})
	if ok, limited, _ := burst("to-cancel", 20); ok != 20 || limited != 0 {
		t.Fatalf("without a grab limit: %d granted, %d limited of 20", ok, limited)
	}
	cancelled, cancelLimited := 0, 0
	toCancel := grantedRids[len(grantedRids)-20:]
	cancels := make([]answer, len(toCancel))
	var wg sync.WaitGroup
	for i, rid := range toCancel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cancels[i] = e.cancel(rid, "m-"+rid)
		}()
	}
	wg.Wait()
	for i, a := range cancels {
		rid := toCancel[i]
		switch {
		case a.res.Result == grab.Returned:
			cancelled++
		case a.status == http.StatusTooManyRequests && a.res.Result == grab.RateLimited:
			cancelLimited++
		default:
			t.Fatalf("cancel %s: %d %s", rid, a.status, a.raw)
		}
	}
	if cancelLimited == 0 || cancelled == 0 {
		t.Fatalf("with cancel limit 2/s over 20 cancels at once: %d returned, %d limited", cancelled, cancelLimited)
	}
	e.settled(id, total, granted-cancelled)
}

// withDegrade gives the instance the publisher main wires: Kafka, or MySQL while degraded.
func withDegrade(_ *grab.Config, d *grab.Deps) {
	d.Publisher = publish.NewRouter(d.Publisher, d.Record.(publish.FlowLog), d.Switches, nil)
}

// kafkaDegrade with the broker stopped: once the switch applies, grabs keep being
// granted, each committed to the MySQL flow log; grants made before the flip went
// to Kafka. When the sink writes those, the log holds every grant exactly once.
func TestSwitchKafkaDegradeWithBrokerStopped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withDegrade)
	oc := e.followNacos()
	ctx := context.Background()
	const total = 1_000_000
	id := e.promotion("degrade", spec{total: total, maxPerGrab: 1})
	l := e.startLoad(8, id)
	testenv.Within(t, 30*time.Second, "the load under way", func() bool { return l.grants(id) >= 50 })

	degraded := normal()
	// The cap is TestSwitchDegradeCapBoundsGrabsToMySQL's; here every grab goes through.
	degraded.KafkaDegrade, degraded.DegradeRateFactor, degraded.DegradeMaxPerSecond = true, 0.5, configcenter.MaxDegradeMaxPerSecond
	oc.publish(degraded)
	probes := 0
	testenv.Within(t, testenv.SwitchDeadline(), "grants committed straight to MySQL", func() bool {
		probes++
		rid := fmt.Sprintf("dg-%d", probes)
		if e.probe(rid, id).res.Result != grab.Granted {
			return false
		}
		in, err := e.db.HasGrab(ctx, e.rid(rid), id, 1)
		return err == nil && in
	})
	// Grabs that began before the flip finish on Kafka; after it nothing new goes there.
	testenv.Within(t, 20*time.Second, "publishes begun before the flip answered", func() bool { return e.pub.InFlight() == 0 })
	e.kafka.Close()
	l.markNow()
	testenv.Within(t, 30*time.Second, "grants with the broker stopped", func() bool { return l.grantedAfter.Load() >= 50 })
	l.finish()
	if l.sentAfter.Load() != l.grantedAfter.Load() {
		t.Fatalf("with the broker stopped and degrade on, %d of %d grabs were not granted: %v",
			l.sentAfter.Load()-l.grantedAfter.Load(), l.sentAfter.Load(), l.tally())
	}
	for answer := range l.tally() {
		if answer != "200 GRANTED" {
			t.Errorf("unexpected answer under load: %s", answer)
		}
	}

	// The flow sink writes what Kafka acknowledged before the flip (and may
	// redeliver it): the log then holds every grant, each exactly once.
	kafkaEvents := e.pub.Events()
	for range 2 {
		if _, err := e.db.InsertFlows(ctx, kafkaEvents); err != nil {
			t.Fatal(err)
		}
	}
	rids := l.granted[id]
	for i := 1; i <= probes; i++ {
		rids = append(rids, e.rid(fmt.Sprintf("dg-%d", i))) // every probe was granted
	}
	for _, rid := range rids {
		if in, err := e.db.HasGrab(ctx, rid, id, 1); err != nil || !in {
			t.Fatalf("grant %s is not in the flow log (err %v)", rid, err)
		}
	}
	recorded, err := e.db.GrantedByRecord(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if recorded != int64(len(rids)) {
		t.Fatalf("the flow log sums to %d for %d grants: a grant is missing or doubled", recorded, len(rids))
	}
	if kafkaGrabs := countEvents(kafkaEvents, flow.Grab); kafkaGrabs == 0 || kafkaGrabs >= len(rids) {
		t.Fatalf("%d of %d grants went through Kafka: want those before the flip only", kafkaGrabs, len(rids))
	}
	e.settled(id, total, len(rids))
}

// While degraded the promotion's rate limit is multiplied by degradeRateFactor.
func TestSwitchDegradeRateFactor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withDegrade)
	oc := e.followNacos()
	id := e.promotion("factor", spec{total: 100, maxPerGrab: 1, rateLimit: 10})
	degraded := normal()
	degraded.KafkaDegrade, degraded.DegradeRateFactor = true, 0.5
	md5 := oc.publish(degraded)
	testenv.Within(t, testenv.SwitchDeadline(), "degrade applied", func() bool { return e.switches.Load().MD5 == md5 })
	answers := map[grab.Outcome]int{}
	for i := range 8 {
		answers[e.probe(fmt.Sprintf("f-%d", i), id).res.Result]++
	}
	if answers[grab.Granted] != 5 || answers[grab.RateLimited] != 3 {
		t.Fatalf("rate limit 10 per window at factor 0.5: %v, want 5 granted and 3 limited", answers)
	}
	if n := len(e.pub.Events()); n != 0 {
		t.Fatalf("%d events went to Kafka while degraded", n)
	}
	if recorded, _ := e.db.GrantedByRecord(context.Background(), id, 1); recorded != 5 {
		t.Fatalf("the flow log holds %d grants, want 5", recorded)
	}
	oc.publish(normal())
	n := 0
	testenv.Within(t, testenv.SwitchDeadline(), "the full rate limit back", func() bool {
		n++
		return e.probe(fmt.Sprintf("f-back-%d", n), id).res.Result == grab.Granted
	})
}

// A bot banned by pin or by address range (blockedPins, blockedIps) is refused
// 403 BLOCKED within 1 s of the change, with no Redis call: nothing taken, no
// ledger entry, no request index entry; every other buyer keeps being granted,
// and a lifted ban sells again within 1 s.
func TestSwitchBlockedBuyers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oc := e.followNacos()
	id := e.promotion("ban", spec{total: 1000, maxPerGrab: 1})
	key := promo.Key(id, 1)
	botPin := "bot-" + e.suffix
	banned := normal()
	banned.BlockedPins, banned.BlockedIPs = []string{botPin}, []string{"10.77.0.0/16", "2001:db8:77::/48"}
	// Lists as a risk feed fills them: 100,000 entries each apply within the same 1 s.
	for i := range 100_000 {
		banned.BlockedPins = append(banned.BlockedPins, fmt.Sprintf("feed-bot-%d", i))
		banned.BlockedIPs = append(banned.BlockedIPs, fmt.Sprintf("172.%d.%d.%d", 16+i>>16, i>>8&255, i&255))
	}
	published := time.Now()
	oc.publish(banned)
	n := 0
	testenv.Within(t, testenv.SwitchDeadline(), "the banned pin answers 403 BLOCKED", func() bool {
		n++
		a := e.grab(grabBody(fmt.Sprintf("ban-%d", n), botPin, "198.51.100.7", id, 1))
		return a.status == http.StatusForbidden && a.res.Result == grab.Blocked
	})
	t.Logf("lists of %d pins and %d addresses in force %s after the publish", len(banned.BlockedPins), len(banned.BlockedIPs),
		time.Since(published).Round(time.Millisecond))
	before := e.hash(id)
	for i, b := range []struct{ pin, ip string }{
		{botPin, "198.51.100.7"}, {"buyer-a-" + e.suffix, "10.77.200.1"}, {"buyer-b-" + e.suffix, "2001:db8:77:1::9"},
	} {
		rid := fmt.Sprintf("ban-check-%d", i)
		a := e.grab(grabBody(rid, b.pin, b.ip, id, 1))
		if a.status != http.StatusForbidden || a.res.Result != grab.Blocked || a.res.FailedItem != nil {
			t.Fatalf("grab by %s from %s: %d %s, want 403 BLOCKED", b.pin, b.ip, a.status, a.raw)
		}
		if _, found, err := lua.ReadLedger(context.Background(), e.shard(key), key, e.rid(rid)); err != nil || found {
			t.Fatalf("a BLOCKED grab reached the ledger: found=%v err=%v", found, err)
		}
		ik := promo.RequestIndexKey(e.rid(rid))
		if n, err := e.shard(ik).Exists(context.Background(), ik).Result(); err != nil || n != 0 {
			t.Fatalf("a BLOCKED grab claimed its requestId: %d %v", n, err)
		}
	}
	if after := e.hash(id); after != before {
		t.Fatalf("a BLOCKED grab touched the promotion: %+v -> %+v", before, after)
	}
	for i, ip := range []string{"10.78.0.1", "198.51.100.7", "2001:db8:78::1"} {
		if a := e.grab(grabBody(fmt.Sprintf("ban-ok-%d", i), fmt.Sprintf("buyer-%d-%s", i, e.suffix), ip, id, 1)); a.res.Result != grab.Granted {
			t.Fatalf("a buyer on no list, from %s: %d %s", ip, a.status, a.raw)
		}
	}

	oc.publish(normal())
	n = 0
	testenv.Within(t, testenv.SwitchDeadline(), "the lifted ban sells again", func() bool {
		n++
		return e.grab(grabBody(fmt.Sprintf("unban-%d", n), botPin, "10.77.0.1", id, 1)).res.Result == grab.Granted
	})
}

// While degraded, an instance sends at most degradeMaxPerSecond grabs a second to
// MySQL, for a promotion without a rate limit too (before the cap, such a
// promotion sent a MySQL transaction for every press): beyond it RATE_LIMITED with
// Retry-After, nothing taken, nothing in the flow log; the cap refills with time.
func TestSwitchDegradeCapBoundsGrabsToMySQL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withDegrade)
	oc := e.followNacos()
	id := e.promotion("degcap", spec{total: 100, maxPerGrab: 1}) // no rate limit
	degraded := normal()
	degraded.KafkaDegrade, degraded.DegradeMaxPerSecond = true, 1
	md5 := oc.publish(degraded)
	testenv.Within(t, testenv.SwitchDeadline(), "degrade applied", func() bool { return e.switches.Load().MD5 == md5 })

	start := time.Now()
	answers := map[grab.Outcome]int{}
	granted := ""
	for i := range 10 {
		a := e.probe(fmt.Sprintf("dc-%d", i), id)
		answers[a.res.Result]++
		if a.res.Result == grab.Granted {
			granted = fmt.Sprintf("dc-%d", i)
		}
		if a.res.Result == grab.RateLimited && (a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "") {
			t.Fatalf("capped grab answered %d with Retry-After %q: %s", a.status, a.header.Get("Retry-After"), a.raw)
		}
	}
	// One token to start with, one more a second; a slow machine may earn more.
	allowed := 1 + int(time.Since(start).Seconds())
	if g := answers[grab.Granted]; g < 1 || g > allowed || answers[grab.RateLimited] != 10-g {
		t.Fatalf("10 grabs at a cap of 1 a second: %v, want 1 (at most %d) granted and the rest RATE_LIMITED", answers, allowed)
	}
	if recorded, _ := e.db.GrantedByRecord(context.Background(), id, 1); recorded != int64(answers[grab.Granted]) {
		t.Fatalf("the flow log holds %d grants for %d GRANTED answers", recorded, answers[grab.Granted])
	}
	if h := e.hash(id); h.Remaining != 100-int64(answers[grab.Granted]) {
		t.Fatalf("remaining %d after %d grants: a capped grab took stock", h.Remaining, answers[grab.Granted])
	}
	// A resend of a granted grab (its answer lost) is not a new grab: with the cap
	// spent it still answers the grant, not a definite RATE_LIMITED.
	if a := e.probe(granted, id); a.res.Result != grab.Granted {
		t.Fatalf("a resend of granted %s with the cap spent: %d %s, want the replay of its grant", granted, a.status, a.raw)
	}
	e.clock.Advance(2 * time.Second)
	if a := e.probe("dc-later", id); a.res.Result != grab.Granted {
		t.Fatalf("two seconds later the cap has room again: %d %s", a.status, a.raw)
	}
}

// isolatedDB is a Redis database of the local stack's shards that only these
// tests use: the stack's own grab-service reconciles every promotion of database
// 0, and would pay (through the stack's Kafka) a CANCEL a test keeps owed on purpose.
const isolatedDB = 11

// isolatedEnv is newEnv on the shards' isolatedDB.
func isolatedEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	addrs := testenv.Stack(t).Redis
	shards := make([]*redis.Client, len(addrs))
	universal := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, DB: isolatedDB})
		t.Cleanup(func() { c.Close() })
		shards[i], universal[i] = c, c
	}
	e := newEnv(t, append(opts, func(_ *grab.Config, d *grab.Deps) { d.Shards = universal })...)
	e.shards = shards
	return e
}

// grantEach grabs one unit of id for each request id (pin "pin-"+rid, the same ip)
// and fails the test unless every grab is granted.
func (e *env) grantEach(t *testing.T, id, ip string, rids ...string) {
	t.Helper()
	for _, g := range rids {
		if a := e.grab(grabBody(g, "pin-"+g, ip, id, 1)); a.res.Result != grab.Granted {
			t.Fatalf("grab %s: %d %s", g, a.status, a.raw)
		}
	}
}

// A CANCEL while degraded for a GRAB that went to Kafka before the flip and is not
// in MySQL yet: it must not be written to MySQL (the insert would skip it, and the
// GRAB sunk later would stand), so it follows the GRAB through Kafka; with Kafka
// down it stays owed until the sink has brought the GRAB into MySQL.
func TestDegradedCancelOfAGrabStillInKafka(t *testing.T) {
	t.Parallel()
	e := isolatedEnv(t, withDegrade)
	ctx := context.Background()
	id := e.promotion("dg-cancel", spec{total: 10, maxPerGrab: 1})
	e.grantEach(t, id, "10.4.0.1", "g1", "g2")
	snap, err := configcenter.Parse([]byte(`{"kafkaDegrade": true, "degradeRateFactor": 0.5}`))
	if err != nil {
		t.Fatal(err)
	}
	e.switches.Store(snap)

	// Kafka up: g1's CANCEL goes to Kafka, behind its GRAB.
	if a := e.cancel("g1", "pin-g1"); a.res.Result != grab.Returned {
		t.Fatalf("cancel g1: %d %s", a.status, a.raw)
	}
	var order []string
	for _, ev := range e.pub.Events() {
		if ev.RequestID == e.rid("g1") {
			order = append(order, string(ev.Kind))
		}
	}
	if fmt.Sprint(order) != "[GRAB CANCEL]" {
		t.Fatalf("g1 events on Kafka: %v, want [GRAB CANCEL]", order)
	}
	if e.ledger(id, "g1").State != lua.LedgerReturned {
		t.Fatalf("g1's CANCEL was acknowledged, yet the ledger says %+v", e.ledger(id, "g1"))
	}

	// Kafka down: g2's CANCEL cannot follow its GRAB yet, so it stays owed.
	e.kafka.Close()
	if a := e.cancel("g2", "pin-g2"); a.res.Result != grab.Returned {
		t.Fatalf("cancel g2: %d %s", a.status, a.raw)
	}
	e.pastDeadline() // owed CANCELs are the reconciler's once their take's deadline has passed
	if _, err := e.rec.Reconcile(ctx); err == nil {
		t.Fatal("the reconciler paid g2's CANCEL with Kafka down and its GRAB not in MySQL")
	}
	if e.ledger(id, "g2").State != lua.LedgerCancelled {
		t.Fatalf("g2's CANCEL should still be owed: %+v", e.ledger(id, "g2"))
	}
	// The sink brings what Kafka holds into MySQL (GRAB g1, GRAB g2, CANCEL g1) ...
	if _, err := e.db.InsertFlows(ctx, e.pub.Events()); err != nil {
		t.Fatal(err)
	}
	// ... and now the owed CANCEL goes straight to MySQL.
	if st := e.reconcile(); st.Published != 1 {
		t.Fatalf("reconcile: %+v, want g2's CANCEL paid", st)
	}
	if e.ledger(id, "g2").State != lua.LedgerReturned {
		t.Fatalf("g2 after the reconciler: %+v", e.ledger(id, "g2"))
	}

	// A grant and a cancel while degraded go to MySQL only.
	if a := e.grab(grabBody("g3", "pin-g3", "10.4.0.1", id, 1)); a.res.Result != grab.Granted {
		t.Fatalf("grab g3: %d %s", a.status, a.raw)
	}
	if a := e.cancel("g3", "pin-g3"); a.res.Result != grab.Returned || e.ledger(id, "g3").State != lua.LedgerReturned {
		t.Fatalf("cancel g3: %d %s", a.status, a.raw)
	}
	recorded, err := e.db.GrantedByRecord(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if h := e.hash(id); recorded != 0 || h.Remaining != 10 {
		t.Fatalf("record grants %d, Redis remaining %d: want 0 and 10", recorded, h.Remaining)
	}
}

// Not degraded, a CANCEL Kafka refuses is recorded in MySQL at once when its GRAB
// is there, so the debt does not wait in Redis alone for the reconciler (a shard
// lost meanwhile would lose it); one whose GRAB is not in MySQL yet stays owed.
func TestCancelKafkaRefusesIsRecordedInMySQL(t *testing.T) {
	t.Parallel()
	e := isolatedEnv(t, withDegrade)
	ctx := context.Background()
	id := e.promotion("refused-cancel", spec{total: 10, maxPerGrab: 1})
	e.grantEach(t, id, "10.5.0.1", "g1", "g2")
	// The sink has written g1's GRAB; g2's is still in Kafka.
	var g1 []flow.Event
	for _, ev := range e.pub.Events() {
		if ev.RequestID == e.rid("g1") {
			g1 = append(g1, ev)
		}
	}
	if _, err := e.db.InsertFlows(ctx, g1); err != nil {
		t.Fatal(err)
	}
	e.kafka.Close()

	if a := e.cancel("g1", "pin-g1"); a.res.Result != grab.Returned {
		t.Fatalf("cancel g1: %d %s", a.status, a.raw)
	}
	if st := e.ledger(id, "g1").State; st != lua.LedgerReturned {
		t.Fatalf("g1's CANCEL should be paid in MySQL, yet its ledger entry is %s", st)
	}
	if recorded, err := e.db.GrantedByRecord(ctx, id, 1); err != nil || recorded != 0 {
		t.Fatalf("the record grants %d (%v); want g1's GRAB netted by its CANCEL", recorded, err)
	}
	if a := e.cancel("g2", "pin-g2"); a.res.Result != grab.Returned {
		t.Fatalf("cancel g2: %d %s", a.status, a.raw)
	}
	if st := e.ledger(id, "g2").State; st != lua.LedgerCancelled {
		t.Fatalf("g2's CANCEL cannot be recorded before its GRAB and should stay owed, yet its ledger entry is %s", st)
	}
	// A copy of g2's debt is kept in the record: once the sink has written g2's GRAB
	// it can be settled there, even if the shard (and the debt in it) were lost.
	for _, ev := range e.pub.Events() {
		if ev.RequestID == e.rid("g2") {
			if _, err := e.db.InsertFlows(ctx, []flow.Event{ev}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if recorded, _ := e.db.GrantedByRecord(ctx, id, 1); recorded != 1 {
		t.Fatalf("with g2's GRAB sunk the record grants %d; want 1 before the owed CANCEL is settled", recorded)
	}
	if n, err := e.db.SettleOwedCancels(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("settling the owed list: %d (%v); want g2's CANCEL", n, err)
	}
	if recorded, err := e.db.GrantedByRecord(ctx, id, 1); err != nil || recorded != 0 {
		t.Fatalf("the record grants %d (%v) after the owed CANCEL was settled; want 0", recorded, err)
	}
}

// The rollback of a grab that reached no record, while degraded: its CANCEL goes
// to Kafka (its GRAB might be there), where the sink skips it, so the sum holds.
func TestDegradedRollbackOfAnOrphanTake(t *testing.T) {
	t.Parallel()
	e := isolatedEnv(t, withDegrade, crashAt("after-take"))
	ctx := context.Background()
	snap, err := configcenter.Parse([]byte(`{"kafkaDegrade": true, "degradeRateFactor": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	e.switches.Store(snap)
	id := e.promotion("dg-orphan", spec{total: 5})
	if a := e.grab(grabBody("o1", "olga", "10.4.0.2", id, 2)); a.status != http.StatusInternalServerError {
		t.Fatalf("the killed grab answered %d %s", a.status, a.raw)
	}
	e.pastDeadline()
	if st := e.reconcile(); st.Aborted != 1 || st.Published != 1 {
		t.Fatalf("reconcile: %+v, want one abort and its CANCEL", st)
	}
	if n := countEvents(e.pub.Events(), flow.Cancel); n != 1 {
		t.Fatalf("%d CANCEL events on Kafka, want the rollback's", n)
	}
	if _, err := e.db.InsertFlows(ctx, e.pub.Events()); err != nil { // the sink skips the orphan CANCEL
		t.Fatal(err)
	}
	recorded, _ := e.db.GrantedByRecord(ctx, id, 1)
	if h := e.hash(id); recorded != 0 || h.Remaining != 5 {
		t.Fatalf("record grants %d, Redis remaining %d: want 0 and 5", recorded, h.Remaining)
	}
}
