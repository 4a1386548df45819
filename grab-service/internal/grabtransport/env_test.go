package grabtransport_test

// Component tests: the real grab-service handler over the local stack's 16
// redis-servers, a throwaway MariaDB database, and an in-process kfake Kafka
// cluster of the test's own (so a test can stop its broker mid-sale).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/app"
	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/grab-service/internal/grabtransport"
	"github.com/flashsale/platform/internal/apitest"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/promostate"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

const checkoutToken = "test-checkout-token"

type env struct {
	t        *testing.T
	srv      *httptest.Server
	ops      *httptest.Server // the ops listener's handler: /metrics, the probes
	svc      *grab.Grabber
	rec      *grab.Reconciler // the reconciler of svc: tests run its passes
	shards   []*redis.Client
	kafka    *kfake.Cluster
	pub      *grabtest.Publisher                    // Kafka's, recording what it acknowledged
	before   atomic.Pointer[func(flow.Event) error] // see intercept
	db       *store.Flows
	switches *configcenter.Holder
	fence    *grab.Fence // nil but with appShards
	clock    *testenv.Clock
	suffix   string
	cfg      grab.Config
}

type envOpt func(*grab.Config, *grab.Deps)

// refuse makes publishes of kind fail from now on ("": none).
func (e *env) refuse(kind flow.Kind) {
	e.intercept(func(ev flow.Event) error {
		if kind != "" && ev.Kind == kind {
			return fmt.Errorf("test: %s events refused", kind)
		}
		return nil
	})
}

// intercept has before see every event first from now on (nil: none); its error
// fails the publish, as Kafka's would.
func (e *env) intercept(before func(flow.Event) error) { e.before.Store(&before) }

// intercepted is the publisher's Fail: the events through intercept's before.
func (e *env) intercepted(_ context.Context, events []flow.Event) error {
	before := e.before.Load()
	if before == nil || *before == nil {
		return nil
	}
	for _, ev := range events {
		if err := (*before)(ev); err != nil {
			return err
		}
	}
	return nil
}

// appShards runs the env on the app's own shard clients and fence, as main does:
// they follow the switches' shardAddrs. (Other tests keep clients of their own,
// shared across the package's tests, and no fence.)
func appShards(_ *grab.Config, d *grab.Deps) { d.Shards = nil }

func newEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	e := &env{t: t, shards: testenv.Shards(t), clock: &testenv.Clock{}, suffix: testenv.Suffix()}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(16, flow.Topic), kfake.SeedTopics(4, promostate.Topic))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	e.kafka = cluster
	t.Cleanup(cluster.Close)

	cfg := grab.Defaults()
	// Tests that count grants must not see them turn into (correct) timeouts on a
	// machine loaded by the race detector and other packages; a test about timeouts
	// sets its own.
	cfg.AnswerTimeout = 15 * time.Second
	// Tests share the shards: each reconciler keeps to its own test's promotions.
	cfg.ReconcileMatch = promo.PendingKey("C_*-" + e.suffix + "_*")
	cfg.HoldsKey = promo.HoldsKey + ":" + e.suffix
	cfg.StateOutboxKey = promo.StateOutboxKey + ":" + e.suffix
	shards := make([]redis.UniversalClient, len(e.shards))
	for i, c := range e.shards {
		shards[i] = c
	}
	// The app as main.go builds it, but for the test's own shard clients, clock,
	// recording publisher (straight to Kafka unless an option routes it) and
	// metrics, and without the fence and the reconciler's promotion list: every
	// pass sweeps the test's pending sets.
	hook := func(c *grab.Config, d *grab.Deps, kafka grab.Publisher) {
		e.pub = &grabtest.Publisher{Next: kafka, Fail: e.intercepted}
		own, ownFence := d.Shards, d.Fence
		d.Shards, d.Publisher, d.Clock, d.Fence, d.PromotionKeys = shards, e.pub, e.clock.Now, nil, nil
		d.Metrics, d.Logger = grab.NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil))
		for _, o := range opts {
			o(c, d)
		}
		if d.Shards == nil { // appShards
			d.Shards, d.Fence = own, ownFence
		}
		e.cfg = *c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(ctx, app.Config{
		RedisAddrs: testenv.Stack(t).Redis, MySQLDSN: testenv.MySQLDSN(t),
		KafkaBrokers: cluster.ListenAddrs(), KafkaBatchTimeout: 2 * time.Millisecond,
		Tokens: httpx.Tokens{{Token: checkoutToken, Role: httpx.RoleCheckout}, {Token: "viewer", Role: httpx.RoleViewer}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Grab: cfg, Hook: hook,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.svc, e.rec, e.db, e.switches, e.fence = a.Service, a.Reconciler, a.Store.Flows, a.Switches, a.Fence
	// Behind the contract's validator: every request of every test here, and its
	// answer, is checked against api/openapi.yaml.
	e.srv = httptest.NewServer(apitest.Wrap(t, apitest.GrabService, httpx.Serve(nil, 0, a.Handler)))
	e.ops = httptest.NewServer(a.Ops)
	t.Cleanup(func() { e.srv.Close(); e.ops.Close(); a.Close() })
	return e
}

// spec describes a test promotion; zero fields take sane defaults.
type spec struct {
	total, perPin, perIP, maxPerGrab, rateLimit int64
	start, end                                  time.Time
	envelope                                    []int64 // an envelope pool's parts in hand-out order (pool)
	channels                                    promo.Channels
}

// promotion creates a promotion directly on its shard and returns its id.
func (e *env) promotion(name string, s spec) string {
	e.t.Helper()
	id := fmt.Sprintf("%s-%s", name, e.suffix)
	s = e.defaults(s)
	key := promo.Key(id, 1)
	code, err := lua.Create(context.Background(), e.shard(key), ring.Default.Shard(key), key, lua.AdminSpec{Ver: 1, Total: s.total, PerPin: s.perPin,
		PerIP: s.perIP, MaxPerGrab: s.maxPerGrab, RateLimit: s.rateLimit, RateWindowMs: 60_000,
		StartMs: s.start.UnixMilli(), EndMs: s.end.UnixMilli(), State: "ACTIVE", Envelope: s.envelope, Channels: s.channels})
	if err != nil || code != lua.AdminOK {
		e.t.Fatalf("create %s: %v %v", key, code, err)
	}
	return id
}

// defaults fills a spec's zero fields: 5 a grab, live from a minute ago for a day.
func (e *env) defaults(s spec) spec {
	if s.maxPerGrab == 0 {
		s.maxPerGrab = 5
	}
	if s.start.IsZero() {
		s.start = e.clock.Now().Add(-time.Minute)
	}
	if s.end.IsZero() {
		s.end = e.clock.Now().Add(24 * time.Hour)
	}
	return s
}

func (e *env) shard(key string) *redis.Client { return e.shards[ring.Default.Shard(key)] }

// clients is the shard clients as the packages that take any client want them.
func (e *env) clients() []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(e.shards))
	for i, c := range e.shards {
		out[i] = c
	}
	return out
}

func (e *env) hash(id string) lua.HashState {
	e.t.Helper()
	key := promo.Key(id, 1)
	h, found, err := lua.ReadHash(context.Background(), e.shard(key), key)
	if err != nil || !found {
		e.t.Fatalf("read %s: found=%v err=%v", key, found, err)
	}
	return h
}

func (e *env) held(id, which, field string) int64 {
	key := promo.Key(id, 1)
	hk := promo.PinsKey(key)
	if which == "ip" {
		hk = promo.IPsKey(key)
	}
	n, err := e.shard(key).HGet(context.Background(), hk, field).Int64()
	if err != nil && err != redis.Nil {
		e.t.Fatalf("held %s %s: %v", hk, field, err)
	}
	return n
}

// grabBody builds a grab request body for items (promoId, num) of type 1.
func grabBody(rid, pin, ip string, items ...any) map[string]any {
	var its []map[string]any
	for i := 0; i < len(items); i += 2 {
		its = append(its, map[string]any{"promoId": items[i], "type": 1, "num": items[i+1]})
	}
	return map[string]any{"requestId": rid, "pin": pin, "ip": ip, "items": its}
}

type answer struct {
	status int
	header http.Header
	res    grab.Result
	err    httpx.Error
	raw    string
}

func (e *env) do(method, path, token string, body any) answer {
	return e.send(method, path, token, nil, body)
}

// send is do with extra request headers.
func (e *env) send(method, path, token string, header http.Header, body any) answer {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Errorf("%s %s: %v", method, path, err)
		return answer{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.res)
	_ = json.Unmarshal(raw, &a.err)
	return a
}

// rid makes a test's request id unique to this run: requestIds are platform-wide and
// the shared shards remember them (the request index) for a month.
func (e *env) rid(id string) string { return id + "-" + e.suffix }

// grab sends body with its requestId made unique to this run (see rid).
func (e *env) grab(body map[string]any) answer {
	return e.grabAttempt(body, "")
}

// grabAttempt is grab with the attempt header (none when attempt is "").
func (e *env) grabAttempt(body map[string]any, attempt string) answer {
	if id, ok := body["requestId"].(string); ok && !strings.HasSuffix(id, "-"+e.suffix) {
		body["requestId"] = e.rid(id)
	}
	var h http.Header
	if attempt != "" {
		h = http.Header{grabtransport.AttemptHeader: {attempt}}
	}
	a := e.send("POST", "/v1/grab", checkoutToken, h, body)
	if a.status == http.StatusServiceUnavailable && a.res.Result == grab.Unavailable && !knownDecision(a.res.Decision) {
		e.t.Errorf("grab %v answered 503 UNAVAILABLE without a decision: %s", body["requestId"], a.raw)
	}
	return a
}

// knownDecision holds every grab's 503 UNAVAILABLE, in every test that grabs
// through env, to the contract's GrabDecision.
func knownDecision(d grab.Decision) bool {
	switch d {
	case grab.NothingTaken, grab.Undecided, grab.RolledBack:
		return true
	}
	return false
}

func (e *env) cancel(rid, pin string) answer {
	return e.do("POST", "/v1/grab/"+e.rid(rid)+"/cancel", checkoutToken, map[string]any{"pin": pin})
}

// ops is GET path on the ops listener: its status and body.
func (e *env) opsGet(path string) (int, string) {
	e.t.Helper()
	resp, err := e.ops.Client().Get(e.ops.URL + path)
	if err != nil {
		e.t.Fatalf("ops %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
