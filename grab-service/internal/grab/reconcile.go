package grab

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/lua"
)

// The reconciler closes the crash window: a take left pending past its deadline is
// committed if the record holds its GRAB (no CANCEL there or owed), else aborted
// and its CANCEL published; it also pays every CANCEL still owed. A multi-shard
// grab is settled as a whole through its anchor take (docs/design.md, "Settling a
// request as a whole").

// ReconcileStats counts one pass.
type ReconcileStats struct {
	Committed, Aborted, Published int
	// HoldsExpired counts the held grants not confirmed in time that the pass returned.
	HoldsExpired int
	// StatesPublished counts the sale state changes the pass published: ENDED of
	// the promotions whose sale ended, and what a crash left in the outboxes.
	StatesPublished int
	// Blocked counts the due takes the pass could not settle (a shard or the record
	// it needed did not answer, or a shard waits for its rebuild); how long they have
	// waited is kept per pending set (reconcilePasses).
	Blocked    int
	recordDown error         // the record failed a back-query this pass
	shardDown  map[int]error // shards that failed a read this pass, asked no more
}

// Reconciler settles what the grab path left open, on the service's shards. It
// is composed of the parts it uses: the request index, the router, the shard
// guard, a publisher of flow events, and the cancel path for holds that ran out.
type Reconciler struct {
	*core
	index  *requestIndex
	route  *router
	guard  *shardGuard
	events eventPublisher
	cancel canceller
	passes reconcilePasses
	ended  endedAnnounced
}

// eventPublisher publishes flow events and waits for their acknowledgement (settler).
type eventPublisher interface {
	publish(ctx context.Context, events ...flow.Event) error
}

// canceller returns a grant as a buyer's cancel does (Grabber).
type canceller interface {
	Cancel(ctx context.Context, requestID, pin, reason string) (Result, error)
}

// NewReconciler builds the reconciler from svc's parts.
func NewReconciler(svc *Grabber) *Reconciler {
	return &Reconciler{core: svc.core, index: svc.index, route: svc.route, guard: svc.guard,
		events: svc.settle, cancel: svc}
}

// RunReconciler runs a pass at once and then every interval until ctx ends.
func (s *Reconciler) RunReconciler(ctx context.Context, every time.Duration) error {
	return svc.Every(ctx, every, func(ctx context.Context) {
		if _, err := s.Reconcile(ctx); err != nil {
			s.logErr("reconcile pass incomplete", err)
		}
	})
}

type owed struct {
	shard int
	key   string
	rid   string
	entry lua.LedgerEntry
}

// Reconcile runs one pass over every shard. The CANCELs owed on all shards go out
// in one batch, so a pass costs one Kafka round trip, and one timeout while Kafka is down.
func (s *Reconciler) Reconcile(ctx context.Context) (ReconcileStats, error) {
	var st ReconcileStats
	var firstErr error
	var debts []owed
	listed, sweep, now := s.passes.next(ctx, s)
	for shard, c := range s.Shards {
		sets := listed[shard]
		if sweep {
			var err error
			sets, err = s.sweepPending(ctx, shard, c)
			switch {
			case err == nil:
				s.passes.onlyBlocked(shard, sets) // a set gone (settled, expired) holds nothing
			case firstErr == nil:
				firstErr = err // what the SCAN found before it failed is still settled
			}
		}
		d, err := s.reconcileShard(ctx, shard, c, sets, &st)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		debts = append(debts, d...)
	}
	if sweep && firstErr == nil {
		s.passes.swept(now) // a shard whose sweep failed is swept again next pass
	}
	if err := s.payDebts(ctx, debts, &st); err != nil && firstErr == nil {
		firstErr = err
	}
	expired, err := s.expireHolds(ctx, s.Clock())
	st.HoldsExpired = expired
	if err != nil && firstErr == nil {
		firstErr = err
	}
	published, err := s.announceStates(ctx, s.Clock())
	st.StatesPublished = published
	if err != nil && firstErr == nil {
		firstErr = err
	}
	// A take its anchor's shard keeps open for good is never settled (consistency
	// first); how long it has waited is what on-call is paged on.
	s.Metrics.overdue.Set(s.passes.overdue(now))
	return st, firstErr
}

// reconcilePasses decides what a pass visits: the pending sets of the promotions
// the record lists, with a sweep of every shard's keyspace only every
// ReconcileSweepEvery, as a sweep costs in proportion to every key. It remembers,
// per pending set, the earliest take its last visit left open (docs/design.md,
// "What a reconciler pass visits").
type reconcilePasses struct {
	mu        sync.Mutex
	lastSweep time.Time
	listed    []string // the record's last answer, kept while it does not answer
	blocked   map[string]blockedSet
}

type blockedSet struct {
	shard int
	since time.Time // the earliest settling time of a take left open
}

// visited records what a visit of pending set key (on shard) left open: since is
// the earliest settling time of a take it could not settle, zero for none.
func (p *reconcilePasses) visited(key string, shard int, since time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if since.IsZero() {
		delete(p.blocked, key)
		return
	}
	if p.blocked == nil {
		p.blocked = map[string]blockedSet{}
	}
	p.blocked[key] = blockedSet{shard, since}
}

// onlyBlocked forgets the blocked sets of shard that its completed sweep did not
// find (sorted sets).
func (p *reconcilePasses) onlyBlocked(shard int, sets []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, b := range p.blocked {
		if _, found := slices.BinarySearch(sets, key); b.shard == shard && !found {
			delete(p.blocked, key)
		}
	}
}

// overdue is how long past its settling time the oldest take left open has waited,
// in seconds (0 for none).
func (p *reconcilePasses) overdue(now time.Time) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	oldest := 0.0
	for _, b := range p.blocked {
		oldest = max(oldest, now.Sub(b.since).Seconds())
	}
	return oldest
}

// next returns the promotion pending keys to visit by shard, or sweep, and the
// pass's time.
func (p *reconcilePasses) next(ctx context.Context, s *Reconciler) (map[int][]string, bool, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := s.Clock()
	if s.PromotionKeys == nil || p.lastSweep.IsZero() || now.Sub(p.lastSweep) >= s.cfg.ReconcileSweepEvery {
		return nil, true, now
	}
	keys, err := s.PromotionKeys(ctx)
	switch {
	case err == nil:
		p.listed = keys
	case p.listed == nil:
		s.logErr("the record lists no promotions; sweeping the shards instead", err)
		return nil, true, now
	default:
		s.logErr("the record lists no promotions; visiting its last list", err)
	}
	byShard := map[int][]string{}
	for _, k := range p.listed {
		shard := s.ring.Shard(k)
		byShard[shard] = append(byShard[shard], promo.PendingKey(k))
	}
	return byShard, false, now
}

// swept records a sweep of every shard that completed.
func (p *reconcilePasses) swept(at time.Time) {
	p.mu.Lock()
	p.lastSweep = at
	p.mu.Unlock()
}

// sweepPending lists every pending set of the shard matching ReconcileMatch (with
// what it found before a SCAN failed). Keys of another layout, or of another shard
// sharing this server, are passed over.
func (s *Reconciler) sweepPending(ctx context.Context, shard int, c redis.UniversalClient) ([]string, error) {
	var sets []string
	iter := c.Scan(ctx, 0, s.cfg.ReconcileMatch, 500).Iterator()
	for iter.Next(ctx) {
		key := promo.PendingBase(iter.Val())
		if _, _, ok := promo.ParseKey(key); ok && s.ring.Shard(key) == shard {
			sets = append(sets, iter.Val())
		}
	}
	slices.Sort(sets)
	return slices.Compact(sets), iter.Err() // SCAN may return a key twice
}

func (s *Reconciler) reconcileShard(ctx context.Context, shard int, c redis.UniversalClient, sets []string, st *ReconcileStats) ([]owed, error) {
	due := strconv.FormatInt(s.Clock().Add(-s.cfg.ReconcileMargin).UnixMilli(), 10)
	var debts []owed
	// The due entries of many sets in one round trip: most sets hold none.
	for chunk := range slices.Chunk(sets, dueReadsPerPipeline) {
		reads := make([]*redis.ZSliceCmd, len(chunk))
		if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, pendingKey := range chunk {
				reads[i] = p.ZRangeByScoreWithScores(ctx, pendingKey, &redis.ZRangeBy{Min: "-inf", Max: due, Count: 200})
			}
			return nil
		}); err != nil {
			return debts, err
		}
		for i, pendingKey := range chunk {
			d, blockedSince, err := s.settleDue(ctx, shard, c, pendingKey, reads[i].Val(), st)
			debts = append(debts, d...)
			if err != nil {
				return debts, err
			}
			s.passes.visited(pendingKey, shard, blockedSince)
		}
	}
	return debts, nil
}

// dueReadsPerPipeline bounds one pipeline of the reconciler's reads of due entries.
const dueReadsPerPipeline = 500

// settleDue settles the due entries of one pending set (requestIds scored by
// their deadlines) and returns the CANCELs they owe and the earliest settling time
// of a take it could not settle (zero for none).
func (s *Reconciler) settleDue(ctx context.Context, shard int, c redis.UniversalClient, pendingKey string, due []redis.Z, st *ReconcileStats) ([]owed, time.Time, error) {
	key := promo.PendingBase(pendingKey)
	var debts []owed
	var blockedSince time.Time
	for _, z := range due {
		rid, _ := z.Member.(string)
		e, found, err := lua.ReadLedger(ctx, c, key, rid)
		if err != nil {
			return debts, blockedSince, err
		}
		switch {
		case !found:
			c.ZRem(ctx, pendingKey, rid)
		case e.State == lua.LedgerPending:
			if d, err := s.settlePending(ctx, key, rid, e, st); err != nil {
				s.logErr("settle pending take", err, "key", key, "requestId", rid)
				st.Blocked++
				settleAt := time.UnixMilli(int64(z.Score)).Add(s.cfg.ReconcileMargin)
				if blockedSince.IsZero() || settleAt.Before(blockedSince) {
					blockedSince = settleAt
				}
			} else if d && promo.HoldsStock(e.Part) { // a part without stock owes nothing
				e.State = lua.LedgerAborted
				debts = append(debts, owed{shard, key, rid, e})
			}
		case e.State == lua.LedgerAborted || e.State == lua.LedgerCancelled:
			debts = append(debts, owed{shard, key, rid, e})
		default: // settled entries do not belong in the set
			c.ZRem(ctx, pendingKey, rid)
		}
	}
	return debts, blockedSince, nil
}

// settlePending settles a take left pending by the outcome of its whole request
// (requestOutcome): commits it, or aborts it; it reports whether a CANCEL is now
// owed.
func (s *Reconciler) settlePending(ctx context.Context, key, rid string, e lua.LedgerEntry, st *ReconcileStats) (bool, error) {
	// Bounded as a whole: a hung MySQL or shard must not stall the pass (and with it
	// every owed CANCEL on every shard).
	dctx, cancel := context.WithTimeout(ctx, s.cfg.AnswerTimeout)
	defer cancel()
	own := take{s.ring.Shard(key), key}
	granted, takes, err := s.requestOutcome(dctx, rid, own, e, st)
	if err != nil {
		return false, err // cannot tell: leave it for the next pass
	}
	if granted {
		if err := s.Fault.At("reconcile-commit"); err != nil {
			return false, err
		}
		committed, err := s.commitTake(ctx, own, rid, st)
		if committed {
			s.followCancel(dctx, rid, e.Pin, takes[0], own)
		}
		return false, err
	}
	// A take of it the killed process (or a live abort that failed part way) left
	// committed goes back too, owing its CANCEL like a buyer's cancel.
	for _, t := range takes {
		if t != own {
			s.cancelTake(dctx, t, rid, e.Pin, rollbackReason)
		}
	}
	return s.abortTake(ctx, own, rid, e.Pin, st)
}

// commitTake commits a pending take (P -> G) and counts it; committed is false when
// it was not pending.
func (s *Reconciler) commitTake(ctx context.Context, t take, rid string, st *ReconcileStats) (committed bool, err error) {
	code, err := lua.Commit(ctx, s.Shards[t.shard], rid, []string{t.key})
	if err != nil || code != lua.CommitCommitted {
		return false, err
	}
	st.Committed++
	s.Metrics.reconciled.WithLabelValues("committed").Inc()
	return true, nil
}

// abortTake aborts a pending take (P -> A: stock back, a CANCEL owed) and counts
// it; aborted is false when it was not pending (committed meanwhile, or already
// aborted: nothing owed by this call).
func (s *Reconciler) abortTake(ctx context.Context, t take, rid, pin string, st *ReconcileStats) (aborted bool, err error) {
	r, err := lua.Return(ctx, s.Shards[t.shard], lua.ReturnCall{RequestID: rid, Pin: pin, Mode: lua.ReturnAbort, NowMs: s.Clock().UnixMilli(), Keys: []string{t.key}, Outbox: s.cfg.StateOutboxKey})
	s.post(t.shard, r.Changes)
	if err != nil || r.Code != lua.ReturnReturned {
		return false, err
	}
	st.Aborted++
	s.Metrics.reconciled.WithLabelValues("aborted").Inc()
	s.Metrics.rollbacks.WithLabelValues("reconciled").Inc()
	return true, nil
}

// cancelTake gives back a committed take as a buyer's cancel does (G -> C: stock
// back, a CANCEL owed, paid by a later pass); a take in any other state is left as
// it is. A failure is logged: the pass that settles another take of the request
// tries again.
func (s *Reconciler) cancelTake(ctx context.Context, t take, rid, pin, reason string) {
	call := lua.ReturnCall{RequestID: rid, Pin: pin, Mode: lua.ReturnCancel, Reason: reason, NowMs: s.Clock().UnixMilli(), Keys: []string{t.key}, Outbox: s.cfg.StateOutboxKey}
	r, err := lua.Return(ctx, s.Shards[t.shard], call)
	s.logErr("cancel of a take by the reconciler failed", err, "requestId", rid, "shard", t.shard)
	s.post(t.shard, r.Changes)
}

// take is one promotion's part of a request, on its shard.
type take struct {
	shard int
	key   string
}

// requestOutcome is whether request rid, whose take own is pending, was granted.
// A grab is granted or rolled back as a whole, so one of its takes decides for
// all: the anchor, its first by shard and key. An anchor settled already (G: yes;
// A, X, C, R or never made: no) is the answer. A pending anchor is settled first,
// by what every take and the record say (anchorVerdict): commit.lua and return.lua
// each turn P into G or A atomically and refuse the other, so whichever reconciler
// reaches the anchor first decides the request for every take and every instance.
func (s *Reconciler) requestOutcome(ctx context.Context, rid string, own take, ownEntry lua.LedgerEntry, st *ReconcileStats) (bool, []take, error) {
	takes, items, err := s.takesOf(ctx, rid, own, st)
	if err != nil {
		return false, nil, err
	}
	read := func(t take) (lua.LedgerEntry, bool, error) {
		if t == own {
			return ownEntry, true, nil // read by the pass a moment ago: pending
		}
		return s.readTake(ctx, t, rid, st)
	}
	anchor := takes[0]
	for range 2 { // read, settle if pending, read the settled state
		e, found, err := read(anchor)
		switch {
		case err != nil:
			return false, nil, err
		case !found:
			return false, takes, nil // never taken: the GRAB was never sent
		case e.State == lua.LedgerCommitted:
			return true, takes, nil
		case e.State != lua.LedgerPending:
			return false, takes, nil
		}
		yes, err := s.anchorVerdict(ctx, rid, takes, items, read, st)
		if err != nil {
			return false, nil, err
		}
		if anchor == own {
			return yes, takes, nil // settlePending settles it, atomically as here
		}
		if yes {
			_, err = s.commitTake(ctx, anchor, rid, st)
		} else { // its CANCEL is paid when its pending set is visited
			_, err = s.abortTake(ctx, anchor, rid, e.Pin, st)
		}
		if err != nil {
			return false, nil, err
		}
	}
	return false, nil, fmt.Errorf("the anchor take of %s is still pending after it was settled", rid)
}

// followCancel cancels the take own, just committed, when the buyer's cancel
// reached the anchor meanwhile: the cancel returns the takes it finds granted and
// refuses pending ones, so one that landed between this pass's read of the anchor
// and its commit would leave this take granted beside a cancelled anchor. Read
// after the commit, the anchor tells: either the cancel came later and finds this
// take granted too, or it is seen here. A failure is logged.
func (s *Reconciler) followCancel(ctx context.Context, rid, pin string, anchor, own take) {
	if anchor == own {
		return
	}
	a, found, err := lua.ReadLedger(ctx, s.Shards[anchor.shard], anchor.key, rid)
	switch {
	case err != nil:
		s.logErr("following a cancel of the request's anchor failed", err, "requestId", rid, "shard", anchor.shard)
	case found && (a.State == lua.LedgerCancelled || a.State == lua.LedgerReturned):
		s.cancelTake(ctx, own, rid, pin, a.Reason)
	}
}

// readTake reads a take's ledger entry. An entry missing from a shard that lost its
// data (not yet rebuilt) cannot be told from one never made: the rebuild restores it
// from the record if its GRAB is there, so the decision waits for it.
// A shard that fails a read is asked no more in the pass: a frozen one would
// otherwise cost every take that needs it an answer timeout, one after another.
func (s *Reconciler) readTake(ctx context.Context, t take, rid string, st *ReconcileStats) (lua.LedgerEntry, bool, error) {
	if err := st.shardDown[t.shard]; err != nil {
		return lua.LedgerEntry{}, false, err
	}
	e, found, err := lua.ReadLedger(ctx, s.Shards[t.shard], t.key, rid)
	switch {
	case err != nil:
		if st.shardDown == nil {
			st.shardDown = map[int]error{}
		}
		st.shardDown[t.shard] = fmt.Errorf("shard %d did not answer this pass: %w", t.shard, err)
		return e, false, st.shardDown[t.shard]
	case !found && s.guard.shardLost(t.shard):
		return e, false, fmt.Errorf("shard %d lost its data: %s waits for its rebuild", t.shard, rid)
	}
	return e, found, nil
}

// anchorVerdict decides a request whose anchor is pending. A take already given
// back or never made means the grab was rolled back (the live abort may have
// reached it); one committed means the GRAB was acknowledged, however far behind
// the record is. Otherwise the record decides: a GRAB for every item, and no
// CANCEL stored or owed for any (store.Granted, item by item).
func (s *Reconciler) anchorVerdict(ctx context.Context, rid string, takes []take, items []flow.Item,
	read func(take) (lua.LedgerEntry, bool, error), st *ReconcileStats) (bool, error) {
	committed := false
	for _, t := range takes {
		e, found, err := read(t)
		switch {
		case err != nil:
			return false, err
		case !found:
			return false, nil
		case e.State == lua.LedgerCommitted:
			committed = true
		case e.State != lua.LedgerPending:
			return false, nil
		}
	}
	if committed || s.Record == nil {
		return committed, nil
	}
	if st.recordDown != nil { // after one failure the pass asks no more
		return false, st.recordDown
	}
	for _, it := range items {
		granted, err := s.Record.Granted(ctx, rid, it.PromoID, it.Type)
		if err != nil {
			st.recordDown = fmt.Errorf("the record did not answer this pass: %w", err)
			return false, st.recordDown
		}
		if !granted {
			return false, nil
		}
	}
	return true, nil
}

// takesOf lists request rid's takes, anchor first, from its request index entry,
// else from the record's GRAB rows; own alone when neither knows it (the index
// entry lost with its shard and the GRAB not stored: nothing says more). An index
// that does not answer is an error, not an absence: the pass after decides.
func (s *Reconciler) takesOf(ctx context.Context, rid string, own take, st *ReconcileStats) ([]take, []flow.Item, error) {
	promoID, typ, _ := promo.ParseKey(own.key)
	ownItem := []flow.Item{{PromoID: promoID, Type: typ}}
	idx, found, err := s.index.readIndex(ctx, rid)
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("the request index entry of %s: %w", rid, err)
	case found:
	case s.guard.shardLost(s.ring.Shard(promo.RequestIndexKey(rid))):
		return nil, nil, fmt.Errorf("the request index shard of %s lost its data: waiting for its rebuild", rid)
	case st.recordDown != nil: // after one failure the pass asks no more
		return nil, nil, st.recordDown
	case s.Record != nil:
		if idx.Pin, idx.IP, idx.Items, err = s.Record.GrabItems(ctx, rid); err != nil {
			st.recordDown = fmt.Errorf("the record did not answer this pass: %w", err)
			return nil, nil, st.recordDown
		}
	}
	takes := []take{own}
	items := ownItem
	for _, it := range idx.Items {
		key := promo.Key(it.PromoID, it.Type)
		for _, t := range s.route.takesOfItem(it, idx.Pin, idx.IP) {
			if t != own {
				takes = append(takes, t)
			}
		}
		if key != promo.BucketBase(own.key) {
			items = append(items, it)
		}
	}
	slices.SortFunc(takes, func(a, b take) int {
		if a.shard != b.shard {
			return a.shard - b.shard
		}
		return strings.Compare(a.key, b.key)
	})
	return takes, items, nil
}

// payDebts publishes the owed CANCEL events in one batch and finalizes them.
func (s *Reconciler) payDebts(ctx context.Context, debts []owed, st *ReconcileStats) error {
	if len(debts) == 0 {
		return nil
	}
	now := s.Clock()
	events := make([]flow.Event, len(debts))
	for i, d := range debts {
		promoID, typ, _ := promo.ParseKey(d.key)
		reason := d.entry.Reason
		if reason == "" {
			reason = rollbackReason
		}
		item := flow.Item{PromoID: promoID, Type: typ, Num: d.entry.Num, Shard: d.shard}
		item.Bucket, item.Buckets = s.route.bucketOf(ctx, d.shard, d.key)
		// Every part of a grab that counted no ip says so (bucket.Plan), the stock's too.
		item.NoIP = item.Buckets > 1 && strings.Contains(d.entry.Part, promo.PartNoIP)
		// An entry of an envelope pool names the parts its return gave back.
		env, err := d.entry.Envelope()
		if err != nil {
			s.logErr("an owed CANCEL's pool parts unreadable; it carries none and the record nets it by its GRAB", err, "requestId", d.rid, "key", d.key)
		}
		item.Amount, item.Parts = env.Amount, env.Parts
		events[i] = newEvent(flow.Cancel, d.rid, d.entry.Pin, d.entry.IP, []flow.Item{item}, now, reason)
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.AnswerTimeout)
	defer cancel()
	if err := s.events.publish(pctx, events...); err != nil {
		return err
	}
	for _, d := range debts {
		if _, err := lua.Return(ctx, s.Shards[d.shard], lua.ReturnCall{RequestID: d.rid, Pin: d.entry.Pin, Mode: lua.ReturnFinalize, NowMs: now.UnixMilli(), Keys: []string{d.key}, Outbox: s.cfg.StateOutboxKey}); err != nil {
			return err
		}
		st.Published++
	}
	s.Metrics.reconciled.WithLabelValues("cancel_published").Add(float64(len(debts)))
	return nil
}
