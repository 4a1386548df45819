package grab

import (
	"fmt"
	"strconv"

	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/lua"
)

// shardGuard keeps grabs off shards that are not whole: the fence's verdicts,
// the clients' generations across a take, and a NOT_FOUND from a shard that lost
// its data (lostshard.go).
type shardGuard struct {
	*core
	// markerReads coalesce each shard's reads of its markers (lostshard.go).
	markerReads [ring.Shards]markerReads
}

// generations are the client generations of the groups' shards, read before a
// take: movedDuring then tells whether a take may have run on a server the fence
// has not judged.
// They are by shard, in an array the grab keeps on its stack (nothing allocated
// per grab).
func (s *shardGuard) generations(gs []group) (gens [ring.Shards]uint64) {
	for _, g := range gs {
		gens[g.shard] = s.Fence.gen(g.shard)
	}
	return gens
}

// movedDuring reports whether a group's shard moved to another server since gens
// were read (generations).
func (s *shardGuard) movedDuring(gs []group, gens *[ring.Shards]uint64) bool {
	for _, g := range gs {
		if s.Fence.gen(g.shard) != gens[g.shard] {
			return true
		}
	}
	return false
}

// fenceRefusal answers UNAVAILABLE, naming the first item on a fenced shard,
// before anything is taken.
func (s *shardGuard) fenceRefusal(rid string, gs []group) (Result, bool) {
	for _, g := range gs { // groups come in order of their first item
		if s.Fence.Fenced(g.shard) {
			s.Fence.refused.WithLabelValues(strconv.Itoa(g.shard), "grab").Inc()
			return notTaken(rid, g.idx[0], fmt.Sprintf("shard %d is being rebuilt; retry shortly", g.shard)), true
		}
	}
	return Result{}, false
}

// fenceCancel refuses a buyer's cancel on a fenced shard. The other modes settle
// takes that began before the fence went up, and must run.
func (s *shardGuard) fenceCancel(call lua.ReturnCall, shard int) error {
	if call.Mode != lua.ReturnCancel || call.Reason == rollbackReason || !s.Fence.Fenced(shard) {
		return nil
	}
	s.Fence.refused.WithLabelValues(strconv.Itoa(shard), "cancel").Inc()
	return fmt.Errorf("cancel on shard %d: %w", shard, errFenced)
}
