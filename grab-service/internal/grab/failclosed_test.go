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
	ctx := context.Background()
	srv := testenv.StartRedis(t, testenv.Volatile)
	admin := srv.Client()
	if err := admin.Do(ctx, "ACL", "SETUSER", "svc", "on", ">pw", "~*", "&*", "+@all", "-exists").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "svc", Password: "pw", Protocol: 2})
	t.Cleanup(func() { c.Close() })
	id := idOnShard(3)
	key := promo.Key(id, 1)
	now := time.Now()
	if code, err := lua.Create(ctx, admin, 3, key, lua.AdminSpec{Ver: 1, Total: 10, MaxPerGrab: 1, RateWindowMs: 1000,
		StartMs: now.Add(-time.Minute).UnixMilli(), EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE"}); err != nil || code != lua.AdminOK {
		t.Fatalf("create: %v %v", code, err)
	}
	switches := configcenter.NewHolder()
	snap, err := configcenter.Parse([]byte(`{"kafkaDegrade": true, "degradeMaxPerSecond": 1}`))
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

	grab := func(rid string) Result {
		res, err := svc.Grab(ctx, Request{RequestID: rid, Pin: "pin-" + rid, IP: "10.0.0.1", Items: []Item{{PromoID: id, Type: 1, Num: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := grab("within-the-cap"); res.Result != Granted {
		t.Fatalf("the first grab, within the cap: %+v", res)
	}
	res := grab("past-the-cap") // not a first attempt by its word: a resend, maybe
	if res.Result != Unavailable {
		t.Fatalf("a grab past the degrade cap whose resend the index could not tell: %s (%s); want UNAVAILABLE", res.Result, res.Message)
	}
	if h, _, err := lua.ReadHash(ctx, admin, key); err != nil || h.Remaining != 9 {
		t.Fatalf("remaining %d (err %v): want 9, the one grab within the cap", h.Remaining, err)
	}
}
