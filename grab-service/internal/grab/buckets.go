package grab

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/expiry"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
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

// learned is what this instance knows of a bucketed promotion: its layout, and
// whether it has an ip limit. Without one its grabs count the ip nowhere (q.lua's
// letter n), so a grab whose stock is its pin's home is one call on one shard; a
// limit set later is learned from the IP_PART_NEEDED it answers.
type learned struct {
	layout  bucket.Layout
	ipLimit bool
}

// router places a request's items on their shards, and knows what this instance
// has learned of the bucketed promotions.
type router struct {
	*core
	layouts *expiry.Map[learned] // promotion key -> its layout
	// empty holds the buckets that answered SOLD_OUT within RefusalTTL: a grab does
	// not start there. A cancel may refill one meanwhile, which costs at most a
	// late SOLD_OUT of that bucket, as the refusal cache does for a promotion.
	empty *expiry.Map[struct{}]
	next  atomic.Uint32 // where the round robin over donor buckets starts
}

func newRouter(c *core) *router {
	return &router{core: c, layouts: expiry.New[learned](bucketLayoutsSize, bucketLayoutsTTL),
		empty: expiry.New[struct{}](emptyBucketsSize, c.cfg.RefusalTTL)}
}

// layout is the layout of promotion key in k buckets, from the cache when it
// holds that one.
func (s *router) layout(key string, k int) bucket.Layout {
	if l, ok := s.layouts.Get(key, s.Clock()); ok && l.layout.K == k {
		return l.layout
	}
	return bucket.LayoutOf(s.ring, key, k)
}

// learn records promotion key's layout in k buckets and whether it has an ip limit.
func (s *router) learn(key string, k int, ipLimit bool, now time.Time) bucket.Layout {
	l := s.layout(key, k)
	s.layouts.Put(key, learned{layout: l, ipLimit: ipLimit}, now)
	return l
}

// route sets where each item's units are to come from: an ordinary promotion's
// from itself, a bucketed one's (as far as this instance knows it) from the pin's
// home bucket, or the next donor when that is known to be sold out.
func (s *router) route(items []Item, pin string, now time.Time) {
	for i := range items {
		it := &items[i]
		known, ok := s.layouts.Get(promo.Key(it.PromoID, it.Type), now)
		if !ok {
			it.buckets, it.bucket, it.noIP = 1, 0, false
			continue
		}
		l := known.layout
		it.noIP = !known.ipLimit
		home := bucket.Home(pin, l.K)
		it.buckets, it.bucket = l.K, s.nextBucket(l, home, 0, now)
		if it.bucket < 0 { // every bucket is known sold out: the home's own answer says so
			it.bucket = home
		}
	}
}

// nextBucket is the bucket to take from: first if it is untried and not known to
// be sold out, else the next such one round robin, else -1.
func (s *router) nextBucket(l bucket.Layout, first int, tried uint32, now time.Time) int {
	usable := func(b int) bool {
		_, empty := s.empty.Get(l.Keys[b], now)
		return tried&(1<<b) == 0 && !empty
	}
	if first >= 0 && usable(first) {
		return first
	}
	start := int(s.next.Add(1))
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

// move is what fallOver does with one item: learn its layout (learned > 0), take
// the same bucket again counting the ip (countIP), or try another bucket after
// soldOutFrom answered SOLD_OUT with left units.
type move struct {
	item        int
	learned     int  // the bucket count q.lua answered, 0 if none
	ipLimit     bool // with learned: the promotion has an ip limit
	countIP     bool // IP_PART_NEEDED: an ip limit set since the layout was learned
	soldOutFrom int  // the bucket that answered SOLD_OUT, -1 if none
	left        int64
}

// fallOver decides, from a grab's takes that did not all succeed, whether it
// goes on: an item's promotion turned out bucketed (or no longer so, or now with an
// ip limit), or an item's stock bucket is sold out while others may not be. It
// re-routes those items and reports true; the caller undoes the takes and tries
// again. tried holds, by item, the buckets already tried. Any other refusal, a
// replay, or a failed shard ends the grab as it is (settleTakes).
func (s *router) fallOver(req Request, gs []group, replies []lua.GrabReply, errs []error, tried []uint32, now time.Time) bool {
	moves, ok := movesOf(req, gs, replies, errs, tried)
	if !ok || len(moves) == 0 {
		return false
	}
	for _, m := range moves {
		if !s.reroute(req, m, tried, now) {
			return false // every bucket is sold out: the SOLD_OUT stands
		}
	}
	return true
}

// movesOf reads the takes' replies: the moves they call for, or false when one
// ends the grab.
func movesOf(req Request, gs []group, replies []lua.GrabReply, errs []error, tried []uint32) ([]move, bool) {
	var moves []move
	for i, g := range gs {
		r := replies[i]
		switch {
		case errs[i] != nil:
			return nil, false
		case r.Code == lua.CodeOK:
			continue
		}
		item := g.idx[r.Index]
		it := req.Items[item]
		switch {
		case r.Code == lua.CodeBucketed:
			moves = append(moves, move{item: item, learned: r.Buckets, ipLimit: r.IPLimit, soldOutFrom: -1})
		case r.Code == lua.CodeNotFound && it.buckets > 1 && tried[item]&learnedHere == 0:
			moves = append(moves, move{item: item, learned: 1, soldOutFrom: -1}) // deleted and made again, maybe whole
		case r.Code == lua.CodeSoldOut && it.buckets > 1 && g.holdsStock(r.Index):
			moves = append(moves, move{item: item, soldOutFrom: it.bucket, left: r.Left})
		case r.Code == lua.CodeIPPartNeeded && it.noIP:
			moves = append(moves, move{item: item, soldOutFrom: -1, countIP: true})
		default:
			return nil, false
		}
	}
	return moves, true
}

// reroute applies m to its item; false when no bucket is left to take from.
func (s *router) reroute(req Request, m move, tried []uint32, now time.Time) bool {
	it := &req.Items[m.item]
	key := promo.Key(it.PromoID, it.Type)
	switch {
	case m.countIP: // the same bucket again, counting the ip
		s.learn(key, it.buckets, true, now)
		it.noIP = false
		return true
	case m.learned == 1:
		it.buckets, it.bucket, it.noIP, tried[m.item] = 1, 0, false, learnedHere
		s.layouts.Forget(key)
		return true
	case m.learned > 1:
		l := s.learn(key, m.learned, m.ipLimit, now)
		it.buckets, it.noIP, tried[m.item] = m.learned, !m.ipLimit, learnedHere
		it.bucket = s.nextBucket(l, bucket.Home(req.Pin, l.K), 0, now)
	default:
		l := s.layout(key, it.buckets)
		if m.left == 0 { // a bucket with fewer units than asked may serve a smaller grab
			s.empty.Put(l.Keys[m.soldOutFrom], struct{}{}, now)
		}
		tried[m.item] |= 1 << m.soldOutFrom
		it.bucket = s.nextBucket(l, -1, tried[m.item], now)
	}
	return it.bucket >= 0
}

// takesOfItem is where an item of a request index entry (or of the record) was
// taken: its promotion's hash, or its parts on the buckets.
func (s *router) takesOfItem(it flow.Item, pin, ip string) []take {
	key := promo.Key(it.PromoID, it.Type)
	if it.Buckets <= 1 {
		return []take{{s.ring.Shard(key), key}}
	}
	parts := s.layout(key, it.Buckets).Parts(it.Bucket, pin, ip, it.NoIP)
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
func (s *router) bucketOf(ctx context.Context, shard int, key string) (b, k int) {
	base := promo.BucketBase(key)
	if base != key {
		b = max(slices.Index(bucket.Keys(s.ring, base, bucket.Max), key), 0)
	}
	if l, ok := s.layouts.Get(base, s.Clock()); ok {
		return b, l.layout.K
	}
	if n, err := s.Shards[shard].HGet(ctx, key, "buckets").Int(); err == nil && n > 1 {
		return b, n
	}
	if b > 0 {
		return b, b + 1
	}
	return 0, 0
}

// groups places the items, of a grab by pin from ip, on their shards: an ordinary
// item on its promotion's, an item of a bucketed promotion as its parts on the
// shards of its stock bucket and of the pin's home bucket, and of the ip's home
// bucket unless the item counts the ip nowhere.
func (s *router) groups(items []Item, pin, ip string) []group {
	var gs []group
	var at [ring.Shards]int // group index + 1 by shard
	add := func(shard, i int, key, part string) {
		if at[shard] == 0 {
			gs = append(gs, group{shard: shard})
			at[shard] = len(gs)
		}
		g := &gs[at[shard]-1]
		g.idx = append(g.idx, i)
		g.keys = append(g.keys, key)
		g.parts = append(g.parts, part)
	}
	for i, it := range items {
		key := promo.Key(it.PromoID, it.Type)
		if it.buckets <= 1 {
			add(s.ring.Shard(key), i, key, "")
			continue
		}
		for _, p := range s.layout(key, it.buckets).Parts(it.bucket, pin, ip, it.noIP) {
			add(p.Shard, i, p.Key, p.Letters)
		}
	}
	return gs
}

// allSoldOut reports whether a SOLD_OUT of item, answered by its hash key with
// left units, is its whole promotion's: an ordinary item's always, a bucketed
// one's once every bucket is known to be empty (the one that answered is marked
// so when it has nothing left; one with fewer units than the grab asked is not).
func (s *router) allSoldOut(it Item, key string, left int64, now time.Time) bool {
	if it.buckets <= 1 {
		return true
	}
	if left > 0 {
		return false
	}
	l := s.layout(promo.BucketBase(key), it.buckets)
	s.empty.Put(key, struct{}{}, now)
	return s.nextBucket(l, -1, 0, now) < 0
}
