package grab

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

// BenchmarkGrantParts is what each part of a grant costs the shard's
// redis-server (redis-us/op, INFO cpu), in pipelines of 16 on one connection: the
// take alone (what the bench's raw q.lua baseline calls), the take with its
// claim, and the take with its claim and a rider (the commit of the grant
// before). go test -bench GrantParts -run ^$ -count 6 ./internal/grab
func BenchmarkGrantParts(b *testing.B) {
	for _, part := range []string{"take", "take+claim", "take+claim+commit"} {
		b.Run(part, func(b *testing.B) {
			client := testenv.StartRedis(b, testenv.Volatile).Client()
			ctx := context.Background()
			if err := lua.Load(ctx, client); err != nil {
				b.Fatal(err)
			}
			key := benchPromotion(b, client)
			entry := flow.RequestIndex{BodyHash: "h", Pin: "p", IP: "10.0.0.1", Items: []flow.Item{{PromoID: "bench", Type: 1, Num: 1}}, ClaimedMs: time.Now().UnixMilli()}
			raw := entry.AppendJSON(nil)
			cpu := redisCPU(b, client)
			b.ResetTimer()
			for i := 0; i < b.N; {
				p := client.Pipeline()
				for k := 0; k < 16 && i < b.N; k, i = k+1, i+1 {
					rid := "g" + strconv.Itoa(i)
					now := time.Now().UnixMilli()
					call := lua.GrabCall{NowMs: now, DeadlineMs: now + 60_000, RequestID: rid, BodyHash: "h",
						Pin: "p" + strconv.Itoa(i%100_000), IP: "10.0.0.1", RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}
					if part != "take" {
						call.Claim = &lua.GrabClaim{IndexKey: promo.RequestIndexKey(rid), Entry: raw, TTLSeconds: 86400}
					}
					if part == "take+claim+commit" && i > 0 {
						call.Commits = []string{"g" + strconv.Itoa(i-1)}
					}
					lua.QueueGrab(ctx, p, call)
				}
				if _, err := p.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric((redisCPU(b, client)-cpu)*1e6/float64(b.N), "redis-us/op")
		})
	}
}
