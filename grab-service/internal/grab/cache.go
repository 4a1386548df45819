package grab

import (
	"context"
	"time"

	"github.com/flashsale/platform/internal/expiry"
	"github.com/flashsale/platform/internal/promo"
)

// refusalCache is the sold-out short-circuit and the start gate: a promotion known
// SOLD_OUT, STOPPED, ENDED, NOT_FOUND or not yet started is answered here, without
// Redis, for at most RefusalTTL (NOT_STARTED until its start). Only a script's
// answer sets an entry, never an error (docs/design.md, "The refusal cache").
type refusalCache = expiry.Map[cachedRefusal]

// cachedRefusal is a cached answer; until, when set, is when it stops holding (a
// NOT_STARTED's start).
type cachedRefusal struct {
	o     Outcome
	until time.Time
}

// holds reports whether the cached answer still stands at now.
func (r cachedRefusal) holds(now time.Time) bool { return r.until.IsZero() || now.Before(r.until) }

// cachedMessages holds the outcomes the refusal cache keeps, each with the message
// its answers carry: built once, so an answer builds no string.
var cachedMessages = func() map[Outcome]string {
	m := map[Outcome]string{}
	for _, o := range []Outcome{SoldOut, Stopped, Ended, NotFound, NotStarted} {
		m[o] = cachedPrefix + string(o) + cachedSuffix
	}
	return m
}()

const cachedPrefix, cachedSuffix = "answered from the local ", " cache"

func cacheable(o Outcome) bool {
	_, ok := cachedMessages[o]
	return ok
}

// cachedMessage is the message of an answer from the refusal cache.
func cachedMessage(o Outcome) string {
	if m, ok := cachedMessages[o]; ok {
		return m
	}
	return cachedPrefix + string(o) + cachedSuffix
}

// The two caches are keyed by the promotions clients name, and a client may name
// any id: NOT_FOUND is cached like SOLD_OUT, and the status route is public. So
// each holds at most its size (the entry put longest ago goes first, the one with
// the least life left) and drops lapsed entries without being read (expiry.Map,
// and the sweeper below): a flood of distinct ids costs at most the size's worth
// of memory while it lasts, and nothing once it stops.
const (
	// DefaultRefusalCacheSize holds every promotion of a sale that can be refused at
	// once (hundreds to a few thousand live at a time: what the record lists as
	// ending within a day) with a margin of four or more. Only a flood of over this
	// many distinct refusals within RefusalTTL (32,768 a second at 500 ms) evicts a
	// hot SOLD_OUT before its time, which then costs one Redis read to put back. An
	// entry is about 200-250 bytes (expiry's test measures it): 4 MiB at most.
	DefaultRefusalCacheSize = 1 << 14
	// DefaultStatusCacheSize is sized as the refusals, and above what the status
	// route's limit lets in within StatusTTL (DefaultStatusRate × 500 ms = 2,500),
	// so a flood of distinct ids meets the limit, not the eviction of the live
	// promotions' entries. An entry is about 250-350 bytes: 6 MiB at most.
	DefaultStatusCacheSize = 1 << 14
)

// sweepCaches drops the lapsed entries of both caches every interval until Close,
// so that the memory a flood of distinct keys took comes back once it stops, read
// or put again or not. Entries are judged by the service's clock, as Get judges
// them; a sweep holds a cache's lock for a few hundred entries at a time.
func (s *Grabber) sweepCaches(every time.Duration) {
	defer close(s.swept)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stopSweep:
			return
		case <-t.C:
			now := s.Clock()
			s.refusals.Sweep(now)
			s.status.m.Sweep(now)
		}
	}
}

// shortCircuit answers from the local SOLD_OUT/STOPPED/ENDED/NOT_FOUND cache without
// the promotion's shard. A requestId that holds a claim may hold a grant (a retry
// after an answer was lost to a crash), and its first answer lives in the ledger, so
// it goes the full way instead; that read is on the index shard of the requestId,
// spread over every shard, never the hot promotion's. A first attempt holds no
// claim by the caller's word, so it is answered with no read at all: after a sell-out
// that is most of the traffic, and the index shards' share of it.
func (s *Grabber) shortCircuit(ctx context.Context, req Request, now time.Time) (Result, bool) {
	for i, it := range req.Items {
		r, ok := s.refusals.Get(promo.Key(it.PromoID, it.Type), now)
		if !ok || !r.holds(now) {
			continue
		}
		o := r.o
		switch resend, err := s.Resend(ctx, req); {
		case err != nil:
			s.logErr("refusal cache: resend unknown", err, "requestId", req.RequestID)
			return IndexSilent(req.RequestID), true
		case resend:
			return Result{}, false
		}
		s.Metrics.shortCircuit.WithLabelValues(string(o)).Inc()
		return refusal(req.RequestID, o, i, cachedMessage(o)), true
	}
	return Result{}, false
}
