// Package privilege runs promo-admin as deploy/security/redis-acl.conf's user
// promo-admin against a real redis-server: create (a pool too), patch, stop and
// delete succeed, the server refused nothing on the way, and what promo-admin
// has no business with is refused.
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

	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/privilege"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/promo-admin/internal/app"
)

const token = "privilege-admin"

func do(t *testing.T, srv *httptest.Server, method, path string, body any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func spec(id string, total int, pool bool) map[string]any {
	now := time.Now().UTC()
	s := map[string]any{"promoId": id, "type": 1, "title": "promotion " + id, "total": total,
		"perPinLimit": 2, "perIpLimit": 10, "maxPerGrab": 2,
		"startAt": now.Add(-time.Minute).Format(time.RFC3339Nano), "endAt": now.Add(24 * time.Hour).Format(time.RFC3339Nano)}
	if pool {
		s["envelope"] = map[string]any{"amount": 1000, "minAmount": 1}
	}
	return s
}

func TestPromoAdminRunsWithinItsRedisACL(t *testing.T) {
	r := privilege.StartRedis(t)
	m := privilege.StartMySQL(t)
	ctx := context.Background()
	opts := app.RedisDefaults()
	opts.Username, opts.Password = privilege.RedisAdmin, privilege.Password(privilege.RedisAdmin)
	a, err := app.New(ctx, app.Config{RedisAddrs: r.Server.Addrs(), Redis: &opts, MySQLDSN: m.RootDSN(),
		Tokens: httpx.Tokens{{Token: token, Role: httpx.RoleMerchandiser, Name: "privilege-test"}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()

	r.ResetLog()
	id, pool := "acl-"+testenv.Suffix(), "pool-"+testenv.Suffix()
	steps := []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/promotions", spec(id, 100, false)},
		{"POST", "/v1/promotions", spec(pool, 10, true)},
		{"PATCH", "/v1/promotions/" + id + "/1", map[string]any{"total": 50}},
		{"GET", "/v1/promotions/" + id + "/1", nil},
		{"POST", "/v1/promotions/" + id + "/1/stop", map[string]any{}},
		{"DELETE", "/v1/promotions/" + id + "/1", nil},
		{"DELETE", "/v1/promotions/" + pool + "/1", nil},
	}
	for _, s := range steps {
		if code, out := do(t, srv, s.method, s.path, s.body); code >= 300 {
			t.Errorf("%s %s: %d %s", s.method, s.path, code, out)
		}
	}
	r.NoDenials()
	r.Refused(privilege.RedisAdmin, []any{"flushall"}, []any{"config", "set", "maxmemory", "1"}, []any{"keys", "*"},
		[]any{"info"}, []any{"script", "flush"}, []any{"get", "R_x"}, []any{"set", "flashsale:built:0", "x"},
		[]any{"zadd", "flashsale:holds", "1", "x"},
		[]any{"eval", "return redis.call('get', KEYS[1])", "1", "R_x"})
}
