package main

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// directRun is the hot phase's baseline: the same q.lua grab grab-service sends,
// called by EVALSHA straight on one Redis, one round trip per call (go-redis
// connection pool only, no coalescing), nothing else. The deadline is far off so
// the reconciler leaves the takes alone until the promotion is deleted.
func directRun(c *redis.Client, run, id string) runner {
	key := promo.Key(id, 1)
	return funcRun(func(ctx context.Context, n int64) string {
		now := time.Now().UnixMilli()
		call := lua.GrabCall{NowMs: now, DeadlineMs: now + time.Hour.Milliseconds(),
			RequestID: run + "-d" + strconv.FormatInt(n, 10), BodyHash: "bench",
			Pin: "p" + strconv.FormatInt(n%pinPool, 10), IP: "198.18.0." + strconv.FormatInt(n%250+1, 10),
			RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}
		r, err := lua.Grab(ctx, c, call)
		return scriptAnswer(r.Code, err)
	})
}

// scriptAnswer names a q.lua answer as grab-service's result field would.
func scriptAnswer(code lua.Code, err error) string {
	switch {
	case err != nil:
		return "ERROR"
	case code == lua.CodeOK:
		return "GRANTED"
	}
	return code.String()
}
