package rebuild

import (
	"strings"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
)

// target is one bucket of a live promotion: what a rebuild restores on the
// bucket's shard. An ordinary promotion is one target, its bucket 0, the
// promotion key; a promotion of K buckets is K targets on K shards, and a shard
// rebuilt restores only the one it holds.
type target struct {
	p      store.Promotion
	layout bucket.Layout
	bucket int
}

func (t target) key() string { return t.layout.Keys[t.bucket] }
func (t target) shard() int  { return t.layout.Shards[t.bucket] }

// layoutOf is where the k buckets of a promotion live (internal/bucket): a function
// of its key and k alone, so the rebuild finds what grab-service and promo-admin
// wrote without storing it. A k the layout does not know (the record never holds
// one) is read as 1: the promotion key certainly names a hash.
func layoutOf(id store.ID, k int) bucket.Layout {
	if l := bucket.LayoutOf(ring.Default, id.Key(), promo.BucketsOf(k)); l.K > 0 {
		return l
	}
	return bucket.LayoutOf(ring.Default, id.Key(), 1)
}

// targets are the buckets of p.
func targets(p store.Promotion) []target {
	l := layoutOf(p.ID(), p.Spec.Buckets)
	out := make([]target, l.K)
	for b := range out {
		out[b] = target{p: p, layout: l, bucket: b}
	}
	return out
}

// part is the letters (q.lua's) of the part the grab of a flow row had on the
// target's bucket, and whether it had one there. A row of an ordinary promotion
// is all of its one bucket; a bucketed row's parts follow from its stock bucket,
// pin and ip (bucket.Layout.Parts), as the product took them. A row naming a
// bucket the promotion does not have is on none, and bad says so.
func (t target) part(r store.FlowRow) (letters string, ok, bad bool) {
	if t.layout.K == 1 {
		return promo.PartAll, true, false
	}
	if r.Bucket < 0 || r.Bucket >= t.layout.K {
		return "", false, true
	}
	for _, p := range t.layout.Parts(r.Bucket, r.Pin, r.IP, r.NoIP) {
		if p.Bucket == t.bucket {
			return p.Letters, true, false
		}
	}
	return "", false, false
}

// has says whether a part's letters hold letter (promo.PartStock, PartPin, PartIP).
func has(letters, letter string) bool { return strings.Contains(letters, letter) }
