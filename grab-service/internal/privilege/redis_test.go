// Package privilege runs grab-service as deploy/security/redis-acl.conf's user
// grab-service against a real redis-server: grab, confirm, cancel, status, the
// fence and the reconciler succeed, and the server refused nothing on the way.
package privilege

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flashsale/platform/grab-service/internal/app"
	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/privilege"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/promostate"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

const token = "privilege-checkout"

func post(t *testing.T, srv *httptest.Server, path string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	method := http.MethodPost
	if body == nil {
		method = http.MethodGet
	}
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestGrabServiceRunsWithinItsRedisACL(t *testing.T) {
	r := privilege.StartRedis(t)
	m := privilege.StartMySQL(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := time.Now()
	id := "acl-" + testenv.Suffix()
	key := promo.Key(id, 1)
	// promo-admin's user creates it, as promo-admin would.
	if code, err := lua.Create(ctx, r.Client(privilege.RedisAdmin), ring.Default.Shard(key), key, lua.AdminSpec{Ver: 1, Total: 10, MaxPerGrab: 2,
		RateWindowMs: 1000, StartMs: now.Add(-time.Hour).UnixMilli(), EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE"}); err != nil || code != lua.AdminOK {
		t.Fatalf("create as promo-admin: %v %v", code, err)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(16, flow.Topic), kfake.SeedTopics(4, promostate.Topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	a, err := app.New(ctx, app.Config{
		RedisAddrs: r.Server.Addrs(), RedisAuth: svc.RedisAuth{Username: privilege.RedisGrab, Password: privilege.Password(privilege.RedisGrab)},
		MySQLDSN: m.RootDSN(), KafkaBrokers: cluster.ListenAddrs(), KafkaBatchTimeout: 2 * time.Millisecond,
		Tokens: httpx.Tokens{{Token: token, Role: httpx.RoleCheckout}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Grab: grab.Defaults(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	go func() { _ = a.RunFence(ctx) }()
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()

	r.ResetLog()
	grabAs := func(rid string, hold int) map[string]any {
		body := map[string]any{"requestId": rid, "pin": "p-" + rid, "ip": "10.1.2.3",
			"items": []map[string]any{{"promoId": id, "type": 1, "num": 1}}}
		if hold > 0 {
			body["holdSeconds"] = hold
		}
		var out map[string]any
		testenv.Within(t, 10*time.Second, "a grant", func() bool {
			_, out = post(t, srv, "/v1/grab", body)
			return out["result"] == "GRANTED"
		})
		return out
	}
	grabAs("r1-"+id, 0)
	grabAs("r2-"+id, 60)
	if code, out := post(t, srv, "/v1/grab/r2-"+id+"/confirm", map[string]any{"pin": "p-r2-" + id}); code != 200 {
		t.Errorf("confirm: %d %v", code, out)
	}
	if code, out := post(t, srv, "/v1/grab/r1-"+id+"/cancel", map[string]any{"pin": "p-r1-" + id}); code != 200 {
		t.Errorf("cancel: %d %v", code, out)
	}
	if code, out := post(t, srv, "/v1/promotions/"+id+"/1/status", nil); code != 200 {
		t.Errorf("status: %d %v", code, out)
	}
	if _, err := a.Reconciler.Reconcile(ctx); err != nil {
		t.Errorf("reconcile: %v", err)
	}
	r.NoDenials()
	r.Refused(privilege.RedisGrab, []any{"flushall"}, []any{"config", "set", "maxmemory", "1"}, []any{"keys", "*"},
		[]any{"script", "flush"}, []any{"acl", "list"}, []any{"set", "other:key", "1"}, []any{"publish", "x", "y"},
		[]any{"eval", "return redis.call('set', KEYS[1], 1)", "1", "other:key"})
}
