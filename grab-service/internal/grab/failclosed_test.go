package grab

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

// A request index that cannot say whether a requestId holds a claim is an error,
// answered UNAVAILABLE with nothing taken: read as "yes", as it was, a grab past the
// degrade cap (or the method limit) went on as a resend and was granted. The index
// here refuses EXISTS alone (an ACL), so everything else of the grab would work.
func TestAnUnknownResendFailsClosed(t *testing.T) {
	t.Parallel()
	f := newSilentIndex(t, 10, `{"kafkaDegrade": true, "degradeMaxPerSecond": 1}`)
	f.silence()
	if res := f.grab("within-the-cap", false); res.Result != Granted {
		t.Fatalf("the first grab, within the cap: %+v", res)
	}
	res := f.grab("past-the-cap", false) // not a first attempt by its word: a resend, maybe
	if res.Result != Unavailable || res.Decision != NothingTaken {
		t.Fatalf("a grab past the degrade cap whose resend the index could not tell: %s %s (%s); want UNAVAILABLE NOTHING_TAKEN", res.Result, res.Decision, res.Message)
	}
	f.wantRemaining(9)
}

// The local refusal cache answers a first attempt by its word; any other send may
// be a resend holding a grant, and when the index cannot say, it is UNAVAILABLE,
// not the cached SOLD_OUT: a refusal must never be told to a grant that stands.
func TestACachedRefusalOfAnUnknownResendFailsClosed(t *testing.T) {
	t.Parallel()
	f := newSilentIndex(t, 1, `{}`)
	if res := f.grab("the-last-unit", false); res.Result != Granted {
		t.Fatalf("the one unit: %+v", res)
	}
	if res := f.grab("sells-out", false); res.Result != SoldOut {
		t.Fatalf("after the last unit: %+v, want SOLD_OUT", res)
	}
	f.silence() // after the sell-out, whose announcement calls EXISTS of its own
	if res := f.grab("first-attempt", true); res.Result != SoldOut || res.Message != "answered from the local SOLD_OUT cache" {
		t.Fatalf("a first attempt after the sell-out: %+v, want SOLD_OUT from the cache", res)
	}
	res := f.grab("the-last-unit", false) // its answer lost, say: sent again
	if res.Result != Unavailable || res.Decision != NothingTaken {
		t.Fatalf("a resend the index could not tell: %s %s (%s); want UNAVAILABLE NOTHING_TAKEN", res.Result, res.Decision, res.Message)
	}
	f.wantRemaining(0)
}

// silentIndex is a Grabber on a server whose request index, once silenced,
// refuses EXISTS alone (an ACL), so everything else of a grab works.
type silentIndex struct {
	t     *testing.T
	svc   *Grabber
	admin *redis.Client
	id    string
}

func newSilentIndex(t *testing.T, total int64, switchesDoc string) *silentIndex {
	ctx := context.Background()
	srv := testenv.StartRedis(t, testenv.Volatile)
	admin := srv.Client()
	if err := admin.Do(ctx, "ACL", "SETUSER", "svc", "on", ">pw", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "svc", Password: "pw", Protocol: 2})
	t.Cleanup(func() { c.Close() })
	id := idOnShard(3)
	now := time.Now()
	if code, err := lua.Create(ctx, admin, 3, promo.Key(id, 1), lua.AdminSpec{Ver: 1, Total: total, MaxPerGrab: 1, RateWindowMs: 1000,
		StartMs: now.Add(-time.Minute).UnixMilli(), EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE"}); err != nil || code != lua.AdminOK {
		t.Fatalf("create: %v %v", code, err)
	}
	switches := configcenter.NewHolder()
	snap, err := configcenter.Parse([]byte(switchesDoc))
	if err != nil {
		t.Fatal(err)
	}
	switches.Store(snap)
	cfg := Defaults()
	cfg.FoldClaim = false
	svc, err := New(cfg, Deps{Shards: testenv.OneServer(c), Publisher: &grabtest.Publisher{}, Switches: switches,
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return &silentIndex{t: t, svc: svc, admin: admin, id: id}
}

// silence takes EXISTS from the service's user, at once for its connections.
func (f *silentIndex) silence() {
	if err := f.admin.Do(context.Background(), "ACL", "SETUSER", "svc", "-exists").Err(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *silentIndex) grab(rid string, firstAttempt bool) Result {
	f.t.Helper()
	res, err := f.svc.Grab(context.Background(), Request{RequestID: rid, Pin: "pin-" + rid, IP: "10.0.0.1",
		Items: []Item{{PromoID: f.id, Type: 1, Num: 1}}, FirstAttempt: firstAttempt})
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

func (f *silentIndex) wantRemaining(n int64) {
	f.t.Helper()
	if h, _, err := lua.ReadHash(context.Background(), f.admin, promo.Key(f.id, 1)); err != nil || h.Remaining != n {
		f.t.Fatalf("remaining %d (err %v): want %d", h.Remaining, err, n)
	}
}
