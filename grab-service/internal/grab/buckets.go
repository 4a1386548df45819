package grab

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/expiry"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// A promotion in buckets (docs/CONTRACT.md, "Buckets") is found out by its first
// grab here: bucket 0 is the promotion's own hash, which answers BUCKETED with the
// count to a grab that sends an ordinary item. From then on its items go to the
// pin's home bucket and, when that is sold out, to the others in turn: each
// attempt is the whole grab, taken all or none, and a refused attempt is undone
// before the next, so no buyer ever holds two attempts' takes.

// Bounds of the bucket routes: both maps are keyed by the promotions and buckets
// that exist (entries are made from the scripts' answers only), so they do not
// grow with what clients send, and each is bounded all the same.
const (
	// bucketLayoutsSize holds the bucketed promotions of a sale with a wide margin.
	bucketLayoutsSize = 1 << 12
	// bucketLayoutsTTL is how long a promotion's bucket count is trusted: a promotion
	// deleted and created again with another count costs one more attempt (BUCKETED
	// or NOT_FOUND from the old layout) before it is learned again.
	bucketLayoutsTTL = 10 * time.Minute
	// emptyBucketsSize holds the sold-out buckets of those promotions.
	emptyBucketsSize = bucketLayoutsSize * bucket.Max
)

// attemptBound bounds one grab's attempts: every bucket of every item, an attempt
// per item to learn its layout, and the first.
func attemptBound(items []Item) int {
	n := 1
	for _, it := range items {
		n += max(it.buckets, 1) + 1
	}
	return n
}

// bucketRoutes is what an instance knows of the bucketed promotions.
type bucketRoutes struct {
	layouts *expiry.Map[bucket.Layout] // promotion key -> its layout
	// empty holds the buckets that answered SOLD_OUT within RefusalTTL: a grab does
	// not start there. A cancel may refill one meanwhile, which costs at most a
	// late SOLD_OUT of that bucket, as the refusal cache does for a promotion.
	empty *expiry.Map[struct{}]
	next  atomic.Uint32 // where the round robin over donor buckets starts
}

func newBucketRoutes(refusalTTL time.Duration) bucketRoutes {
	return bucketRoutes{layouts: expiry.New[bucket.Layout](bucketLayoutsSize, bucketLayoutsTTL),
		empty: expiry.New[struct{}](emptyBucketsSize, refusalTTL)}
}

// layout is the layout of promotion key in k buckets, from the cache when it
// holds that one.
func (s *Grabber) layout(key string, k int) bucket.Layout {
	if l, ok := s.buckets.layouts.Get(key, s.Clock()); ok && l.K == k {
		return l
	}
	return bucket.LayoutOf(s.ring, key, k)
}

// route sets where each item's units are to come from: an ordinary promotion's
// from itself, a bucketed one's (as far as this instance knows it) from the pin's
// home bucket, or the next donor when that is known to be sold out.
func (s *Grabber) route(items []Item, pin string, now time.Time) {
	for i := range items {
		it := &items[i]
		l, ok := s.buckets.layouts.Get(promo.Key(it.PromoID, it.Type), now)
		if !ok {
			it.buckets, it.bucket = 1, 0
			continue
		}
		home := bucket.Home(pin, l.K)
		it.buckets, it.bucket = l.K, s.nextBucket(l, home, 0, now)
		if it.bucket < 0 { // every bucket is known sold out: the home's own answer says so
			it.bucket = home
		}
	}
}

// nextBucket is the bucket to take from: first if it is untried and not known to
// be sold out, else the next such one round robin, else -1.
func (s *Grabber) nextBucket(l bucket.Layout, first int, tried uint32, now time.Time) int {
	usable := func(b int) bool {
		_, empty := s.buckets.empty.Get(l.Keys[b], now)
		return tried&(1<<b) == 0 && !empty
	}
	if first >= 0 && usable(first) {
		return first
	}
	start := int(s.buckets.next.Add(1))
	for i := range l.K {
		if b := (start + i) % l.K; usable(b) {
			return b
		}
	}
	return -1
}

// learnedHere marks, in a grab's tried bits, an item whose layout this grab learned
// from bucket 0 itself: a NOT_FOUND from one of its buckets then is the bucket's
// own (a shard that lost it), not a stale layout, and ends the grab.
const learnedHere = 1 << 31

// fallOver decides, from a grab's takes that did not all succeed, whether it
// goes on: an item's promotion turned out bucketed (or no longer so), or an
// item's stock bucket is sold out while others may not be. It re-routes those
// items and reports true; the caller undoes the takes and tries again. tried
// holds, by item, the buckets already tried. Any other refusal, a replay, or a
// failed shard ends the grab as it is (settleTakes).
func (s *Grabber) fallOver(req Request, gs []group, replies []lua.GrabReply, errs []error, tried []uint32, now time.Time) bool {
	type move struct {
		item        int
		learned     int   // the bucket count q.lua answered, 0 if none
		soldOutFrom int   // the bucket that answered SOLD_OUT, -1 if none
		left        int64 // what that bucket has left (below num)
	}
	var moves []move
	for i, g := range gs {
		r := replies[i]
		switch {
		case errs[i] != nil:
			return false
		case r.Code == lua.CodeOK:
			continue
		}
		item := g.idx[r.Index]
		it := req.Items[item]
		switch {
		case r.Code == lua.CodeBucketed:
			moves = append(moves, move{item, r.Buckets, -1, 0})
		case r.Code == lua.CodeNotFound && it.buckets > 1 && tried[item]&learnedHere == 0:
			moves = append(moves, move{item, 1, -1, 0}) // deleted and made again, maybe whole
		case r.Code == lua.CodeSoldOut && it.buckets > 1 && g.holdsStock(r.Index):
			moves = append(moves, move{item, 0, it.bucket, r.Left})
		default:
			return false
		}
	}
	if len(moves) == 0 {
		return false
	}
	for _, m := range moves {
		it := &req.Items[m.item]
		key := promo.Key(it.PromoID, it.Type)
		if m.learned > 0 {
			it.buckets, it.bucket, tried[m.item] = m.learned, 0, learnedHere
			if m.learned == 1 {
				s.buckets.layouts.Forget(key)
				continue
			}
			l := bucket.LayoutOf(s.ring, key, m.learned)
			s.buckets.layouts.Put(key, l, now)
			it.bucket = s.nextBucket(l, bucket.Home(req.Pin, l.K), 0, now)
		} else {
			l := s.layout(key, it.buckets)
			if m.left == 0 { // a bucket with fewer units than asked may serve a smaller grab
				s.buckets.empty.Put(l.Keys[m.soldOutFrom], struct{}{}, now)
			}
			tried[m.item] |= 1 << m.soldOutFrom
			it.bucket = s.nextBucket(l, -1, tried[m.item], now)
		}
		if it.bucket < 0 {
			return false // every bucket is sold out: the SOLD_OUT stands
		}
	}
	return true
}

// followClaim points the items of a send that found its requestId claimed at the
// buckets the claim names: the index must name the takes the ledgers hold,
// whichever send made them. While the claim is young, the send that made it may
// still be moving a bucketed grab's takes from bucket to bucket, so this one
// waits its turn (503, retry with the same requestId) rather than take beside it.
func (s *Grabber) followClaim(req Request, c claim, now time.Time) (Result, bool) {
	bucketed := false
	for i := range req.Items {
		it := &req.Items[i]
		if i < len(c.items) && c.items[i].PromoID == it.PromoID && c.items[i].Type == it.Type {
			it.buckets, it.bucket = max(c.items[i].Buckets, 1), c.items[i].Bucket
		}
		bucketed = bucketed || it.buckets > 1
	}
	if bucketed && !c.claimedAt.IsZero() && now.Sub(c.claimedAt) <= s.cfg.AnswerTimeout+time.Second {
		return Result{RequestID: req.RequestID, Result: Unavailable,
			Message: "another send of this requestId is in flight; retry with the same requestId for its outcome"}, true
	}
	return Result{}, false
}

// mayFallOver reports whether this send of the grab may move its takes: the send
// that made the claim, or one made when no other send can still be on its way
// (the claim older than an answer time). Each move is a compare and set of the
// index entry (reclaim), so of two such sends only one moves the takes.
func (s *Grabber) mayFallOver(c claim, now time.Time) bool {
	return c.created || c.claimedAt.IsZero() || now.Sub(c.claimedAt) > s.cfg.AnswerTimeout+time.Second
}

// reclaim rewrites the grab's index entry with its items where the next attempt
// takes them, keeping its claim time and its expiry, if the entry is still the
// one c last saw (moved false otherwise: another send moved the takes). A cancel
// and the reconciler find a request's takes there.
func (s *Grabber) reclaim(ctx context.Context, req Request, hash string, items []flow.Item, c *claim) (moved bool, err error) {
	idx := flow.RequestIndex{BodyHash: hash, Pin: req.Pin, IP: req.IP, Items: items, HoldUntilMs: c.holdUntilMs}
	if !c.claimedAt.IsZero() {
		idx.ClaimedMs = c.claimedAt.UnixMilli()
	}
	entry := idx.AppendJSON(nil)
	n, err := s.onIndexShard(ctx, req.RequestID, func(p redis.Pipeliner) *redis.Cmd {
		return lua.QueueReclaim(ctx, p, promo.RequestIndexKey(req.RequestID), c.raw, entry)
	}).Int64()
	if err != nil || n == 0 {
		return false, err
	}
	c.raw, c.items = string(entry), items
	return true, nil
}

// takesOfItem is where an item of a request index entry (or of the record) was
// taken: its promotion's hash, or its parts on the buckets.
func (s *Grabber) takesOfItem(it flow.Item, pin, ip string) []take {
	key := promo.Key(it.PromoID, it.Type)
	if it.Buckets <= 1 {
		return []take{{s.ring.Shard(key), key}}
	}
	parts := s.layout(key, it.Buckets).Parts(it.Bucket, pin, ip)
	out := make([]take, len(parts))
	for i, p := range parts {
		out[i] = take{p.Shard, p.Key}
	}
	return out
}

// bucketOf is the bucket a hash key on shard is of its promotion, and their count
// (a flow item's bucket and buckets; 0, 0 for an ordinary promotion). The count is
// the layout this instance knows, else the hash's own; a hash gone with its
// deleted promotion (or unreadable) gives the least count its bucket allows, and
// the record's rebuild takes the count from the promotion's row.
func (s *Grabber) bucketOf(ctx context.Context, shard int, key string) (b, k int) {
	base := promo.BucketBase(key)
	if base != key {
		b = max(slices.Index(bucket.Keys(s.ring, base, bucket.Max), key), 0)
	}
	if l, ok := s.buckets.layouts.Get(base, s.Clock()); ok {
		return b, l.K
	}
	if n, err := s.Shards[shard].HGet(ctx, key, "buckets").Int(); err == nil && n > 1 {
		return b, n
	}
	if b > 0 {
		return b, b + 1
	}
	return 0, 0
}
