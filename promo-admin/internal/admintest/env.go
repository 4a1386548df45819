// Package admintest runs promo-admin in-process for tests, against the local
// stack's Redis shards (or a test's own redis-server) and a throwaway MySQL
// database, and reads back what it wrote on both sides.
package admintest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/apitest"
	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
	"github.com/flashsale/platform/promo-admin/internal/admintransport"
	"github.com/flashsale/platform/promo-admin/internal/app"
)

// Tokens the test service knows.
const (
	AdminToken    = "test-admin-token"
	ViewerToken   = "test-viewer-token"
	OnCallToken   = "test-oncall-token" // on-call's, named OnCallName
	OnCallName    = "test-oncall"
	CheckoutToken = "dev-checkout-token" // grab-service's: unknown here
	// Approvers' tokens (named ApproverName, Approver2Name), and an approver's
	// under the merchandiser's own name, who may not approve its proposals.
	ApproverToken     = "test-approver-token"
	ApproverName      = "test-approver"
	Approver2Token    = "test-approver2-token"
	Approver2Name     = "test-approver-2"
	SelfApproverToken = "test-self-approver-token"
	MerchandiserName  = "test-merchandiser" // AdminToken's
)

// Options shape an Env; zero values take the local stack and the tests' timeouts.
type Options struct {
	RedisAddrs []string // 16 entries; default the local stack's shards
	DSN        string   // default a fresh throwaway database
	Service    adminservice.Config
	// Switches, when set, is followed for the test's length (GET /v1/switches).
	Switches configcenter.Source
	// SwitchesStore is where PUT /v1/switches publishes; default the file Switches
	// follows, when it is a file.
	SwitchesStore configcenter.Store
	// KafkaBrokers, when set, receive the promo-state events of the admin's changes.
	KafkaBrokers []string
}

// Env is one in-process promo-admin.
type Env struct {
	t      testing.TB
	App    *app.App
	Server *httptest.Server
	// Ops serves the ops listener's handler (/metrics, the probes).
	Ops    *httptest.Server
	Clock  *testenv.Clock
	DSN    string
	Addrs  []string
	shards []*redis.Client // the test's own clients, one per logical shard
}

// Start builds and serves promo-admin; everything is closed when the test ends.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	clock := &testenv.Clock{}
	o = o.withDefaults(t, clock)
	a := newApp(t, o)
	followCtx, stopFollowing := context.WithCancel(context.Background())
	following := make(chan error, 1)
	go func() { following <- a.FollowSwitches(followCtx) }()
	recording := make(chan error, 1)
	go func() { recording <- a.RecordSwitches(followCtx) }()
	// Every request of the test, and its answer, is checked against api/openapi.yaml.
	// The request id middleware, as the server's httpx.Serve gives it (svc.Server).
	srv := httptest.NewServer(apitest.Wrap(t, apitest.PromoAdmin, httpx.Serve(nil, 0, a.Handler)))
	e := &Env{t: t, App: a, Server: srv, Ops: httptest.NewServer(a.Ops), Clock: clock, DSN: o.DSN, Addrs: o.RedisAddrs}
	byAddr := e.dialShards()
	t.Cleanup(func() {
		stopFollowing()
		if err := <-following; err != nil {
			t.Errorf("follow switches: %v", err)
		}
		if err := <-recording; err != nil {
			t.Errorf("record switches: %v", err)
		}
		srv.Close()
		e.Ops.Close()
		a.Close()
		for _, c := range byAddr {
			c.Close()
		}
	})
	return e
}

// withDefaults fills the local stack, a fresh database, the test clock and the
// tests' timeouts into what o leaves zero.
func (o Options) withDefaults(t testing.TB, clock *testenv.Clock) Options {
	if o.RedisAddrs == nil {
		o.RedisAddrs = testenv.Stack(t).Redis
	}
	if o.DSN == "" {
		o.DSN = testenv.MySQLDSN(t)
	}
	if o.Service.Now == nil {
		o.Service.Now = clock.Now
	}
	if fs, ok := o.Switches.(configcenter.FileSource); ok && o.SwitchesStore == nil {
		o.SwitchesStore = configcenter.FileStore{Path: fs.Path}
	}
	if o.Service.RedisTimeout == 0 {
		// A shard a test stops refuses at once, so this bound only decides how long
		// a loaded machine may take over a healthy call; the grace well exceeds it.
		o.Service.RedisTimeout = 5 * time.Second
	}
	if o.Service.RepairGrace == 0 {
		o.Service.RepairGrace = 10 * time.Second
	}
	return o
}

// newApp wires promo-admin with the tests' tokens, logging warnings only.
func newApp(t testing.TB, o Options) *app.App {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(ctx, app.Config{
		RedisAddrs: o.RedisAddrs,
		MySQLDSN:   o.DSN,
		Tokens: httpx.Tokens{
			{Token: AdminToken, Role: httpx.RoleMerchandiser, Name: "test-merchandiser"},
			{Token: ViewerToken, Role: httpx.RoleViewer},
			{Token: OnCallToken, Role: admintransport.RoleOnCall, Name: OnCallName},
			{Token: ApproverToken, Role: httpx.RoleApprover, Name: ApproverName},
			{Token: Approver2Token, Role: httpx.RoleApprover, Name: Approver2Name},
			{Token: SelfApproverToken, Role: httpx.RoleApprover, Name: MerchandiserName},
		},
		Service:       o.Service,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Switches:      o.Switches,
		SwitchesStore: o.SwitchesStore,
		KafkaBrokers:  o.KafkaBrokers,
	})
	if err != nil {
		t.Fatalf("start promo-admin: %v", err)
	}
	return a
}

// dialShards gives the test its own client of each logical shard, one client an
// address; it returns them by address, for closing.
func (e *Env) dialShards() map[string]*redis.Client {
	byAddr := map[string]*redis.Client{}
	for _, addr := range e.Addrs {
		c, ok := byAddr[addr]
		if !ok {
			c = redis.NewClient(&redis.Options{Addr: addr, Protocol: shardpool.Protocol, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
			byAddr[addr] = c
		}
		e.shards = append(e.shards, c)
	}
	return byAddr
}

// Response is an answer of the service.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as an object.
func (r Response) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Promotion decodes the body as a promotion.
func (r Response) Promotion() promo.Promotion {
	var p promo.Promotion
	_ = json.Unmarshal(r.Body, &p)
	return p
}

// Error decodes the body as the contract's Error.
func (r Response) Error() httpx.Error {
	var e httpx.Error
	_ = json.Unmarshal(r.Body, &e)
	return e
}

func (r Response) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// Do sends one request. body is sent as is if it is a string or []byte, else as
// JSON; nil sends no body. token "" sends no Authorization header. Every answer
// must carry X-Request-Id.
func (e *Env) Do(method, path, token string, body any) Response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.Server.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.Server.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("X-Request-Id") == "" {
		e.t.Errorf("%s %s: answer %d has no X-Request-Id", method, path, resp.StatusCode)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Spec is a valid create body for id (type 1): open since a minute, for a day.
func (e *Env) Spec(id string) map[string]any {
	now := e.Clock.Now().UTC()
	return map[string]any{
		"promoId": id, "type": 1, "title": "promotion " + id, "total": 100,
		"perPinLimit": 2, "perIpLimit": 10, "maxPerGrab": 2,
		"rateLimit": map[string]any{"limit": 1000, "windowSeconds": 60},
		"startAt":   now.Add(-time.Minute).Format(time.RFC3339Nano),
		"endAt":     now.Add(24 * time.Hour).Format(time.RFC3339Nano),
	}
}

// Create creates id (type 1) with Spec and fails the test unless it is 201.
func (e *Env) Create(id string) promo.Promotion {
	e.t.Helper()
	r := e.Do(http.MethodPost, "/v1/promotions", AdminToken, e.Spec(id))
	if r.Status != http.StatusCreated {
		e.t.Fatalf("create %s: %s", id, r)
	}
	return r.Promotion()
}

// Row is the promotion's row as stored (a pending create included).
func (e *Env) Row(id string, typ int) (store.Promotion, bool) {
	e.t.Helper()
	p, err := e.App.Store.Promotions.Row(context.Background(), store.ID{PromoID: id, Type: typ})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return store.Promotion{}, false
		}
		e.t.Fatalf("read row %s/%d: %v", id, typ, err)
	}
	return p, true
}

// Shard is the test's own client of a logical shard.
func (e *Env) Shard(shard int) *redis.Client { return e.shards[shard] }

// Hash reads the promotion's hash on the shard the ring names.
func (e *Env) Hash(id string, typ int) (lua.HashState, bool) {
	e.t.Helper()
	key := promo.Key(id, typ)
	shard, _ := e.App.Pool.For(key)
	h, ok, err := lua.ReadHash(context.Background(), e.shards[shard], key)
	if err != nil {
		e.t.Fatalf("read hash %s: %v", key, err)
	}
	return h, ok
}

// Snapshot renders everything stored about the promotions: the rows as stored and,
// on every shard server, the hash and companion keys. Two equal snapshots mean
// nothing changed.
func (e *Env) Snapshot(ids ...store.ID) string {
	e.t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, id := range ids {
		p, err := e.App.Store.Promotions.Row(ctx, id)
		row, _ := json.Marshal(p)
		fmt.Fprintf(&b, "row %s: %s err=%v\n", id, row, err)
		parts, err := e.App.Store.Promotions.EnvelopeParts(ctx, id)
		fmt.Fprintf(&b, "envelope parts %s: %v err=%v\n", id, parts, err)
		keys := promo.Keys(id.Key())
		seen := map[*redis.Client]bool{}
		for _, c := range e.shards {
			if seen[c] {
				continue
			}
			seen[c] = true
			for _, k := range keys {
				fmt.Fprintf(&b, "%s %s\n", c.Options().Addr, keyContent(ctx, c, k))
			}
		}
	}
	return b.String()
}

// keyContent renders key k of c, "<key> <type> <content>", for snapshots.
func keyContent(ctx context.Context, c *redis.Client, k string) string {
	typ, _ := c.Type(ctx, k).Result()
	var content any
	switch typ {
	case "hash":
		m, _ := c.HGetAll(ctx, k).Result()
		content = sortedMap(m)
	case "zset":
		content, _ = c.ZRangeWithScores(ctx, k, 0, -1).Result()
	}
	return fmt.Sprintf("%s %s %v", k, typ, content)
}

func sortedMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s ", k, m[k])
	}
	return b.String()
}

// Layout is where the k buckets of the promotion live.
func (e *Env) Layout(id string, typ, k int) bucket.Layout {
	return bucket.LayoutOf(ring.Default, promo.Key(id, typ), k)
}

// Buckets reads the hashes of the promotion's k buckets, each on its shard;
// exists[b] is false for a bucket whose hash is missing.
func (e *Env) Buckets(id string, typ, k int) (hashes []lua.HashState, exists []bool) {
	e.t.Helper()
	l := e.Layout(id, typ, k)
	for b, key := range l.Keys {
		h, ok, err := lua.ReadHash(context.Background(), e.shards[l.Shards[b]], key)
		if err != nil {
			e.t.Fatalf("read bucket %d %s: %v", b, key, err)
		}
		hashes, exists = append(hashes, h), append(exists, ok)
	}
	return hashes, exists
}

// Take grants num units of bucket b of the promotion in k buckets (type 1) to
// pin, as a grab whose stock, pin and ip all sit on that bucket would (q.lua's
// parts), and commits the take.
func (e *Env) Take(id string, k, b int, pin string, num int64) {
	e.t.Helper()
	l := e.Layout(id, 1, k)
	c := e.shards[l.Shards[b]]
	ctx, now := context.Background(), e.Clock.Now()
	rid := fmt.Sprintf("%s-b%d-%s", id, b, pin)
	r, err := lua.Grab(ctx, c, lua.GrabCall{NowMs: now.UnixMilli(), DeadlineMs: now.Add(time.Minute).UnixMilli(),
		RequestID: rid, BodyHash: "h", Pin: pin, IP: "10.9.0.1", RateFactorPermille: 1000,
		Items: []lua.GrabItem{{Key: l.Keys[b], Num: num, Part: promo.PartAll, Buckets: k}}})
	if err != nil || r.Code != lua.CodeOK {
		e.t.Fatalf("grab %d from bucket %d of %s: %+v %v", num, b, id, r, err)
	}
	if code, err := lua.Commit(ctx, c, rid, []string{l.Keys[b]}); err != nil || code != lua.CommitCommitted {
		e.t.Fatalf("commit %s: %v %v", rid, code, err)
	}
}

// BucketSnapshot renders the hashes and companions of the promotion's k buckets,
// each on its shard: two equal snapshots mean no bucket changed.
func (e *Env) BucketSnapshot(id string, typ, k int) string {
	e.t.Helper()
	ctx := context.Background()
	l := e.Layout(id, typ, k)
	var b strings.Builder
	for i, key := range l.Keys {
		c := e.shards[l.Shards[i]]
		for _, k := range promo.Keys(key) {
			fmt.Fprintf(&b, "bucket %d %s\n", i, keyContent(ctx, c, k))
		}
	}
	return b.String()
}

// Agree fails the test unless the committed row and the hash agree: both absent
// (or the row DELETED and the hash absent), or the same spec, state and version,
// with no change pending. For a promotion in buckets every bucket's hash must
// agree with its share of the row (agreeBuckets).
func (e *Env) Agree(id string, typ int) {
	e.t.Helper()
	row, hasRow := e.Row(id, typ)
	if k := promo.BucketsOf(row.Spec.Buckets); hasRow && k > 1 {
		e.agreeBuckets(row, k)
		return
	}
	h, hasHash := e.Hash(id, typ)
	if hasRow && row.Pending != nil {
		e.t.Errorf("%s/%d: a change is still pending: %+v", id, typ, row.Pending)
		return
	}
	if !hasRow || row.State == promo.Deleted {
		if hasHash {
			e.t.Errorf("%s/%d: no live row (exists %v, state %s) but the hash exists: %+v", id, typ, hasRow, row.State, h)
		}
		return
	}
	if !hasHash {
		e.t.Errorf("%s/%d: row version %d exists but the hash does not", id, typ, row.Version)
		return
	}
	s := row.Spec
	var rl, win int64
	if s.RateLimit != nil {
		rl, win = s.RateLimit.Limit, s.RateLimit.WindowSeconds*1000
	}
	want := fmt.Sprintf("ver=%d total=%d perPin=%d perIp=%d maxPerGrab=%d rate=%d/%d start=%d end=%d state=%s channels=%q",
		row.Version, s.Total, s.PerPinLimit, s.PerIPLimit, s.MaxPerGrab, rl, win, s.StartAt.UnixMilli(), s.EndAt.UnixMilli(), row.State, s.Channels)
	have := fmt.Sprintf("ver=%d total=%d perPin=%d perIp=%d maxPerGrab=%d rate=%d/%d start=%d end=%d state=%s channels=%q",
		h.Ver, h.Total, h.PerPin, h.PerIP, h.MaxPerGrab, h.RateLimit, h.RateWindowMs, h.StartMs, h.EndMs, h.State, h.Channels)
	if want != have {
		e.t.Errorf("%s/%d: row and hash disagree:\n row:  %s\n hash: %s", id, typ, want, have)
	}
	if row.Spec.Envelope != nil || h.IsPool() {
		e.agreePool(row, h)
	}
}

// Pool reads an envelope pool's parts left on its shard (promo.EnvelopeKey), in
// the order they are handed out: idx -> amount, and the idx in order.
func (e *Env) Pool(id string, typ int) (amounts map[int]int64, order []int) {
	e.t.Helper()
	key := promo.Key(id, typ)
	shard, _ := e.App.Pool.For(key)
	members, err := e.shards[shard].ZRange(context.Background(), promo.EnvelopeKey(key), 0, -1).Result()
	if err != nil {
		e.t.Fatalf("read the pool of %s: %v", key, err)
	}
	amounts = map[int]int64{}
	for _, m := range members {
		idx, amount, err := lua.ParseEnvelopeMember(m)
		if err != nil {
			e.t.Fatalf("pool of %s: member %q: %v", key, m, err)
		}
		amounts[idx] = amount
		order = append(order, idx)
	}
	return amounts, order
}

// agreePool is Agree's part for an envelope pool: the hash's budget is the row's,
// every part left on the shard is the record's part of its idx, and they sum to
// envLeft and number remaining.
func (e *Env) agreePool(row store.Promotion, h lua.HashState) {
	e.t.Helper()
	id := row.ID()
	if row.Spec.Envelope == nil || !h.IsPool() || h.EnvAmount != row.Spec.Envelope.Amount {
		e.t.Errorf("%s: row envelope %+v, hash envAmount %d", id, row.Spec.Envelope, h.EnvAmount)
		return
	}
	split, err := e.App.Store.Promotions.EnvelopeParts(context.Background(), id)
	if err != nil {
		e.t.Errorf("%s: the record's split: %v", id, err)
		return
	}
	left, _ := e.Pool(id.PromoID, id.Type)
	var sum int64
	for idx, amount := range left {
		if idx < 0 || idx >= len(split) || split[idx] != amount {
			e.t.Errorf("%s: the shard holds part %d of %d, not the record's", id, idx, amount)
		}
		sum += amount
	}
	if sum != h.EnvLeft || int64(len(left)) != h.Remaining {
		e.t.Errorf("%s: %d parts left summing to %d, but the hash says remaining %d, envLeft %d", id, len(left), sum, h.Remaining, h.EnvLeft)
	}
}

// agreeBuckets is Agree for a row of a promotion in k buckets: each bucket holds
// its share of total (bucket.Shares) and of the rate limit (rounded up), the other
// fields and the bucket count as the row says; none is left once it is deleted.
func (e *Env) agreeBuckets(row store.Promotion, k int) {
	e.t.Helper()
	id := row.ID()
	if row.Pending != nil {
		e.t.Errorf("%s: a change is still pending: %+v", id, row.Pending)
		return
	}
	hashes, exists := e.Buckets(id.PromoID, id.Type, k)
	s := row.Spec
	shares := bucket.Shares(s.Total, k)
	var rl, win int64
	if s.RateLimit != nil {
		rl, win = (s.RateLimit.Limit+int64(k)-1)/int64(k), s.RateLimit.WindowSeconds*1000
	}
	for b, h := range hashes {
		if row.State == promo.Deleted || !row.Committed() {
			if exists[b] {
				e.t.Errorf("%s: no live row (state %s, version %d) but bucket %d's hash exists: %+v", id, row.State, row.Version, b, h)
			}
			continue
		}
		if !exists[b] {
			e.t.Errorf("%s: row version %d exists but bucket %d's hash does not", id, row.Version, b)
			continue
		}
		want := fmt.Sprintf("ver=%d total=%d perPin=%d perIp=%d maxPerGrab=%d rate=%d/%d start=%d end=%d state=%s buckets=%d channels=%q",
			row.Version, shares[b], s.PerPinLimit, s.PerIPLimit, s.MaxPerGrab, rl, win, s.StartAt.UnixMilli(), s.EndAt.UnixMilli(), row.State, k, s.Channels)
		have := fmt.Sprintf("ver=%d total=%d perPin=%d perIp=%d maxPerGrab=%d rate=%d/%d start=%d end=%d state=%s buckets=%d channels=%q",
			h.Ver, h.Total, h.PerPin, h.PerIP, h.MaxPerGrab, h.RateLimit, h.RateWindowMs, h.StartMs, h.EndMs, h.State, h.Buckets, h.Channels)
		if want != have {
			e.t.Errorf("%s: row and bucket %d disagree:\n row:  %s\n hash: %s", id, b, want, have)
		}
	}
}
