package client

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
	"sync"
)

// RequestIDBeside returns base, or base with the shortest suffix ".<k>" (k = 0,
// 1, ...) that makes it, whose request index entry (R_<requestId>) the shard ring
// puts on the shard of promotion promoID of type typ: docs/CONTRACT.md, "A
// requestId beside its promotion". A grab of promotions on that one shard (no
// holdSeconds; of a promotion in buckets, RequestIDBesideBucket) under such a requestId is claimed in the
// take's own script call, a round trip to another shard fewer. Any requestId
// remains valid; this one is cheaper. It costs about 16 hashes, and is a function
// of its arguments alone: a retry derives the same requestId.
//
// It is the platform's promo.RequestIDBeside, rewritten without its dependencies;
// a test of the platform's tools holds the two equal.
func RequestIDBeside(base, promoID string, typ int) string {
	return besideShard(base, Shard(PromotionKey(promoID, typ)))
}

// RequestIDBesideBucket is RequestIDBeside for a promotion in buckets (its
// `buckets` on GET /v1/promotions/...): beside the bucket that is pin's home,
// where grab-service takes a grab of that pin first. While the promotion has no
// ip limit such a grab is one call on that bucket's shard, and with this
// requestId its claim is made in that call too (docs/CONTRACT.md, "A requestId
// beside its promotion"). buckets below 2 is RequestIDBeside.
func RequestIDBesideBucket(base, promoID string, typ, buckets int, pin string) string {
	keys := bucketKeys(PromotionKey(promoID, typ), buckets)
	if len(keys) < 2 { // one bucket, or a count of no promotion
		return RequestIDBeside(base, promoID, typ)
	}
	return besideShard(base, Shard(keys[murmur3Sum64([]byte(pin))%uint64(len(keys))]))
}

// besideShard is base, or base with the shortest suffix ".<k>" whose index
// entry the ring puts on shard want.
func besideShard(base string, want int) string {
	if Shard("R_"+base) == want {
		return base
	}
	for k := 0; ; k++ {
		rid := base + "." + strconv.Itoa(k)
		if Shard("R_"+rid) == want {
			return rid
		}
	}
}

// bucketKeys are the hash keys of a promotion's k buckets (docs/CONTRACT.md,
// "Buckets"): bucket 0 is the promotion's key, bucket b > 0 "<key>:b<label>",
// labels taken 1, 2, ... skipping any the ring puts on a shard an earlier bucket
// holds. Nil for k outside 2..Shards (one bucket is the promotion's key).
func bucketKeys(key string, k int) []string {
	if k < 2 || k > Shards {
		return nil
	}
	var used [Shards]bool
	keys := make([]string, 1, k)
	keys[0], used[Shard(key)] = key, true
	for label := 1; len(keys) < k; label++ {
		bk := key + ":b" + strconv.Itoa(label)
		if s := Shard(bk); !used[s] {
			used[s] = true
			keys = append(keys, bk)
		}
	}
	return keys
}

// PromotionKey is a promotion's Redis hash key, C_<promoId>_<type>: the key the
// shard ring routes.
func PromotionKey(promoID string, typ int) string {
	return "C_" + promoID + "_" + strconv.Itoa(typ)
}

// Shards is the number of logical shards of the ring.
const Shards = 16

// Shard is the logical shard (0..15) the contract's ring gives key
// (docs/CONTRACT.md, "Shard ring"): the owner of the first of the 16 x 160
// murmur3 points at or above murmur3(key), wrapping to the lowest.
func Shard(key string) int {
	pts := ringPoints()
	h := murmur3Sum64([]byte(key))
	i, _ := slices.BinarySearchFunc(pts, h, func(p ringPoint, h uint64) int {
		if p.hash < h {
			return -1
		}
		return 1 // never equal: BinarySearch then returns the first point >= h
	})
	if i == len(pts) {
		i = 0
	}
	return pts[i].shard
}

type ringPoint struct {
	hash  uint64
	shard int
}

// ringPoints is the ring, built once (2,560 hashes).
var ringPoints = sync.OnceValue(func() []ringPoint {
	pts := make([]ringPoint, 0, Shards*160)
	for s := 0; s < Shards; s++ {
		for n := 0; n < 160; n++ {
			key := "SHARD-" + strconv.Itoa(s) + "-NODE-" + strconv.Itoa(n)
			pts = append(pts, ringPoint{murmur3Sum64([]byte(key)), s})
		}
	}
	slices.SortStableFunc(pts, func(a, b ringPoint) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return 0
	})
	return pts
})

// murmur3Sum64 is the first half of MurmurHash3 x64 128 with seed 0: what
// github.com/spaolacci/murmur3's Sum64 returns, which the contract's ring uses.
func murmur3Sum64(data []byte) uint64 {
	const c1, c2 = 0x87c37b91114253d5, 0x4cf5ad432745937f
	var h1, h2 uint64
	n := len(data)
	for len(data) >= 16 {
		k1 := binary.LittleEndian.Uint64(data)
		k2 := binary.LittleEndian.Uint64(data[8:])
		data = data[16:]
		h1 ^= bits.RotateLeft64(k1*c1, 31) * c2
		h1 = (bits.RotateLeft64(h1, 27)+h2)*5 + 0x52dce729
		h2 ^= bits.RotateLeft64(k2*c2, 33) * c1
		h2 = (bits.RotateLeft64(h2, 31)+h1)*5 + 0x38495ab5
	}
	var k1, k2 uint64
	for i := len(data) - 1; i >= 8; i-- {
		k2 = k2<<8 | uint64(data[i])
	}
	for i := min(len(data), 8) - 1; i >= 0; i-- {
		k1 = k1<<8 | uint64(data[i])
	}
	if len(data) > 8 {
		h2 ^= bits.RotateLeft64(k2*c2, 33) * c1
	}
	if len(data) > 0 {
		h1 ^= bits.RotateLeft64(k1*c1, 31) * c2
	}
	h1 ^= uint64(n)
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	h1, h2 = fmix64(h1), fmix64(h2)
	return h1 + h2
}

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
