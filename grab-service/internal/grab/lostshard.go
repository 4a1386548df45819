package grab

import (
	"fmt"
	"strconv"

	"github.com/flashsale/platform/internal/shardmark"
)

// A shard whose Redis server restarted empty answers every script as if the
// promotion, or the grab, did not exist, until the fence sees the missing built
// marker (one poll, ~200 ms) and fences it. In that window NOT_FOUND would be a
// definite, false answer: the checkout would drop the promotion, or be told a
// granted grab is not there to cancel. So a NOT_FOUND is believed only from a shard
// that still holds its built marker (fence.go); otherwise the answer is UNAVAILABLE
// and the client retries. Found by the fault drills (tools/drill, the Redis drill).

// shardLost reports whether shard is not whole (no built marker, or another
// server's: internal/shardmark), or cannot tell, so that a NOT_FOUND from it proves
// nothing. Without a fence every NOT_FOUND is believed.
func (s *Service) shardLost(shard int) bool {
	if s.Fence == nil {
		return false
	}
	ctx, cancel := s.settleCtx()
	defer cancel()
	st, err := shardmark.Read(ctx, s.Shards[shard], shard)
	if err != nil || st.Built != shardmark.Whole {
		s.Fence.refused.WithLabelValues(strconv.Itoa(shard), "lost").Inc()
		return true
	}
	return false
}

func lostMessage(shard int) string {
	return fmt.Sprintf("shard %d lost its data and is not rebuilt yet; nothing was taken, retry shortly", shard)
}
