package grabtransport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/grab-service/internal/grabendpoint"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

// BenchmarkSoldOutAnswer measures grab-service's own work for a first attempt at a
// sold-out promotion, answered from memory: the whole handler chain of main.go
// (request id, access log, deadline, route metrics, token, admission, decode,
// service, encode) in process, against a bare handler writing a fixed answer, the
// baseline of bench scenario 2. Needs the local stack's shards (`make up`):
// go test -bench SoldOutAnswer -benchmem -run '^$' ./internal/grabtransport
// checkoutToken is the token the benchmark's handler knows (env_test.go has its own).
const checkoutToken = "test-checkout-token"

func BenchmarkSoldOutAnswer(b *testing.B) {
	ctx := context.Background()
	clients := testenv.Shards(b)
	shards := make([]redis.UniversalClient, len(clients))
	for i, c := range clients {
		shards[i] = c
	}
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	service, err := grab.New(grab.Defaults(), grab.Deps{Shards: shards, Publisher: &grabtest.Publisher{}, Switches: configcenter.NewHolder(),
		Metrics: grab.NewMetrics(reg), Logger: log, Clock: time.Now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(service.Close)
	id := "bench-sold-" + testenv.Suffix()
	key := promo.Key(id, 1)
	now := time.Now()
	if code, err := lua.Create(ctx, clients[ring.Default.Shard(key)], ring.Default.Shard(key), key, lua.AdminSpec{Ver: 1, Total: 1, MaxPerGrab: 1,
		RateWindowMs: 1000, StartMs: now.Add(-time.Minute).UnixMilli(), EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE"}); err != nil || code != lua.AdminOK {
		b.Fatalf("create: %v %v", code, err)
	}
	mux := http.NewServeMux()
	tokens := httpx.Tokens{{Token: checkoutToken, Role: httpx.RoleCheckout}}
	Handler(mux, grabendpoint.New(service, configcenter.NewHolder(), grabendpoint.NewAdmission(0, 0, reg)), tokens, httpx.NewRouteMetrics(reg, "grab"))
	chain := svc.Server("", httpx.RouteFallback(mux), log).Handler

	body := func(n int) []byte {
		return fmt.Appendf(nil, `{"requestId":"%s-%d","pin":"p%d","ip":"198.18.0.7","items":[{"promoId":"%s","type":1,"num":1}]}`, id, n, n, id)
	}
	serve := func(h http.Handler, n int) int {
		r := httptest.NewRequest(http.MethodPost, "/v1/grab", bytes.NewReader(body(n)))
		r.Header.Set("Authorization", "Bearer "+checkoutToken)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-Grab-Attempt", "1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	// The one unit goes, then a refusal from Redis fills the SOLD_OUT cache.
	for n := range 2 {
		serve(chain, -1-n)
	}
	if code := serve(chain, 0); code != http.StatusConflict && code != http.StatusOK {
		b.Fatalf("a grab of the sold-out promotion answered %d", code)
	}
	fixed := []byte(`{"requestId":"x","result":"SOLD_OUT","failedItem":0}`)
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(fixed)
	})
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"grab-service", chain}, {"bare", bare}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				serve(c.h, n)
			}
		})
	}
}
