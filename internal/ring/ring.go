// Package ring maps a promotion key to one of the 16 logical Redis shards,
// exactly as docs/CONTRACT.md specifies (Jedis-style consistent hashing, murmur3).
package ring

import (
	"fmt"
	"sort"

	"github.com/spaolacci/murmur3"
)

// Shards is the number of logical shards. It is part of the contract: changing it
// moves keys, so it is a constant rather than configuration.
const Shards = 16

// pointsPerShard virtual nodes smooth the distribution (Jedis uses 160 per weight).
const pointsPerShard = 160

type point struct {
	hash  uint64
	shard int
}

// Ring is immutable after New and safe for concurrent use.
type Ring struct {
	points []point
}

// New builds the contract ring of 16 shards.
func New() *Ring {
	pts := make([]point, 0, Shards*pointsPerShard)
	for s := 0; s < Shards; s++ {
		for n := 0; n < pointsPerShard; n++ {
			pts = append(pts, point{murmur3.Sum64([]byte(fmt.Sprintf("SHARD-%d-NODE-%d", s, n))), s})
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].hash < pts[j].hash })
	return &Ring{points: pts}
}

// Shard returns the logical shard owning key: the first point >= murmur3(key),
// wrapping to the lowest point.
func (r *Ring) Shard(key string) int {
	h := murmur3.Sum64([]byte(key))
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i].hash >= h })
	if i == len(r.points) {
		i = 0
	}
	return r.points[i].shard
}

// Default is the ring every service shares; building it costs 2,560 hashes.
var Default = New()
