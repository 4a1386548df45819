// Package bucket splits one hot promotion's stock over K shards, K ordinary
// promotion hashes, so its grabs are not bound by one Redis core, while every
// per-pin and per-ip limit and the total still hold exactly: a pin and an ip each
// have one home bucket that alone counts them, and each bucket a grab touches is
// one part (q.lua's part letters) of a grab taken all or none. docs/design.md,
// "A hot promotion beyond one shard (buckets)"; docs/CONTRACT.md, "Buckets".
package bucket

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/spaolacci/murmur3"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
)

// Max is the most buckets a promotion may have: one per shard.
const Max = 16

// Keys returns the hash keys of the k buckets of the promotion hash key. Bucket 0
// is key itself, so an ordinary promotion is the one bucket it always was, and
// the promotion's own key (the ring's, the status route's, the state events')
// always names a live hash. Bucket b > 0 is key ":b<label>", labels taken in order
// 1, 2, ... skipping any that would land on a shard an earlier bucket holds, so
// the buckets sit on k distinct shards. The layout is a function of the key, k and
// the contract's ring alone, so every service and the rebuild find the same
// buckets without storing them. It is nil for k outside 1..Max: there are only
// Max shards to put them on.
func Keys(r *ring.Ring, key string, k int) []string {
	if k < 1 || k > Max {
		return nil
	}
	keys := make([]string, 1, k)
	keys[0] = key
	used := map[int]bool{r.Shard(key): true}
	for label := 1; len(keys) < k; label++ {
		bk := promo.BucketKey(key, label)
		if s := r.Shard(bk); !used[s] {
			used[s] = true
			keys = append(keys, bk)
		}
	}
	return keys
}

// Layout is where the k buckets of one promotion live.
type Layout struct {
	K      int
	Keys   []string // by bucket
	Shards []int    // by bucket: k distinct shards
}

// LayoutOf is the layout of the promotion hash key in k buckets (Keys); the zero
// Layout for k outside 1..Max.
func LayoutOf(r *ring.Ring, key string, k int) Layout {
	keys := Keys(r, key, k)
	if keys == nil {
		return Layout{}
	}
	l := Layout{K: k, Keys: keys, Shards: make([]int, k)}
	for b, bk := range keys {
		l.Shards[b] = r.Shard(bk)
	}
	return l
}

// PartKey is one part of a grab of a bucketed promotion: the bucket, its hash key
// and shard, and what it checks and takes there (q.lua's part letters).
type PartKey struct {
	Bucket  int
	Key     string
	Shard   int
	Letters string
}

// Parts are the parts of a grab by pin from ip taking its units from bucket stock
// (Plan), with their buckets' keys and shards. noIP: the grab counts the ip
// nowhere (the promotion has no ip limit; flow.Item.NoIP records it).
func (l Layout) Parts(stock int, pin, ip string, noIP bool) []PartKey {
	ipHome := NoIPHome
	if !noIP {
		ipHome = Home(promo.IPCounterKey(ip), l.K) // an ip's home is its counter's
	}
	plan := Plan(stock, Home(pin, l.K), ipHome)
	out := make([]PartKey, len(plan))
	for i, p := range plan {
		out[i] = PartKey{Bucket: p.Bucket, Key: l.Keys[p.Bucket], Shard: l.Shards[p.Bucket], Letters: p.Letters}
	}
	return out
}

// Home is the bucket that counts who (a pin or an ip) among k buckets.
func Home(who string, k int) int {
	return int(murmur3.Sum64([]byte(who)) % uint64(k)) // Sum32 of murmur3 v1.1.0 trips checkptr under -race
}

// Shares splits total into k shares that differ by at most one, the first
// total mod k of them one larger.
func Shares(total int64, k int) []int64 {
	out := make([]int64, k)
	for i := range out {
		out[i] = total / int64(k)
		if int64(i) < total%int64(k) {
			out[i]++
		}
	}
	return out
}

// RateShare is each bucket's share of a promotion's rate limit: rounded up, as the
// window is charged on the pin's home bucket alone and pins spread evenly.
func RateShare(rateLimit int64, k int) int64 { return (rateLimit + int64(k) - 1) / int64(k) }

// Part is what a grab checks and takes on one bucket (q.lua's part letters).
type Part struct {
	Bucket  int
	Letters string
}

// NoIPHome, as Plan's ipHome, says the grab counts the ip nowhere.
const NoIPHome = -1

// Plan is the parts of a grab taking its stock from bucket stock, for a pin whose
// home is pinHome and an ip whose home is ipHome: one part per bucket touched, the
// stock's first, each with the q.lua letters of what it checks and takes there.
// With ipHome NoIPHome there is no ip part and every part carries q.lua's letter
// n: while the promotion has no ip limit, a grab whose stock is its pin's home is
// then one part on one shard. A grab's parts are a function of its stock
// bucket, pin, ip and whether it counted the ip, all in its record, so a cancel,
// the reconciler and the rebuild recompute them.
func Plan(stock, pinHome, ipHome int) []Part {
	var parts []Part
	add := func(b int, letter string) {
		for i := range parts {
			if parts[i].Bucket == b {
				parts[i].Letters += letter
				return
			}
		}
		parts = append(parts, Part{Bucket: b, Letters: letter})
	}
	add(stock, promo.PartStock)
	add(pinHome, promo.PartPin)
	if ipHome != NoIPHome {
		add(ipHome, promo.PartIP)
		return parts
	}
	for i := range parts { // every part says so: the ledger entry of any one tells the grab's parts
		parts[i].Letters += promo.PartNoIP
	}
	return parts
}

// Held sums a counter hash (promo.PinsKey or promo.IPsKey) over all k buckets of
// key: what each pin (ip) holds of the promotion.
func Held(ctx context.Context, shards []redis.UniversalClient, r *ring.Ring, key string, k int, counters func(string) string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, bk := range Keys(r, key, k) {
		m, err := shards[r.Shard(bk)].HGetAll(ctx, counters(bk)).Result()
		if err != nil {
			return nil, fmt.Errorf("held in %s: %w", bk, err)
		}
		for who, v := range m {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("held in %s: %s: %w", bk, who, err)
			}
			out[who] += n
		}
	}
	return out, nil
}
