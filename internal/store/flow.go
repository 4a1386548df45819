package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
)

// Flows is the flow log, grab_flow, with the tables its writes carry along: the
// holds (grab_hold, written in InsertFlows' transaction) and the owed CANCELs
// (owed_cancel, settled into the log by InsertFlows).
type Flows struct {
	db    *sqlx.DB
	stmts flowStmts // InsertFlows' prepared statements
}

// InsertFlows writes flow events into grab_flow in one transaction and keeps each
// promotion's remaining in step. It is idempotent: a row already present (same
// request, kind and promotion) is skipped, so a redelivered event changes nothing;
// a CANCEL whose GRAB is not in the log is skipped too (the rollback of a grab that
// never reached the record). It returns the rows written. One SELECT finds the rows
// present, then prepared multi-row INSERTs write the rest; a writer racing it on a
// row makes the INSERT fail on the unique key, and the caller's retry finds it.
// Why a lookup and not INSERT IGNORE, and why these statement sizes:
// docs/design.md, "Record and recovery".
func (f *Flows) InsertFlows(ctx context.Context, events []flow.Event) (written int, err error) {
	if len(events) == 0 {
		return 0, nil
	}
	st, err := f.statements(ctx)
	if err != nil {
		return 0, err
	}
	w := st.batch()
	defer st.release(w)
	if err := w.rowsOf(events); err != nil || len(w.rows) == 0 && len(w.holds) == 0 {
		return 0, err
	}
	tx, err := f.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("insert flows: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := w.write(ctx, tx, st); err != nil {
		return 0, err
	}
	if err := commit(ctx, tx); err != nil {
		return 0, fmt.Errorf("insert flows: commit: %w", err)
	}
	return len(w.fresh), nil
}

// write is the batch's work in tx: find the rows present, write the others and
// their holds, net the promotions' remaining.
func (w *flowBatch) write(ctx context.Context, tx *sqlx.Tx, st *flowStmts) error {
	if err := w.lookUpPresent(ctx, tx.Tx, st); err != nil {
		return err
	}
	w.pickFresh()
	if err := w.adoptEarly(ctx, tx.Tx); err != nil {
		return err
	}
	if err := w.insertFresh(ctx, tx.Tx, st); err != nil {
		return err
	}
	if err := w.park(ctx, tx.Tx); err != nil {
		return err
	}
	// The holds before the promotions' UPDATE: not while their hot rows are locked.
	if err := writeHolds(ctx, tx, w.holds); err != nil {
		return err
	}
	return w.netRemaining(ctx, tx.Tx, st)
}

// pickFresh keeps the rows to write (w.fresh): not present, not repeated within
// the batch; a CANCEL whose GRAB is neither in the log nor in the batch is parked
// (early.go); and adds up what they move (w.delta).
func (w *flowBatch) pickFresh() {
	present := w.present
	for _, r := range w.rows {
		if present[r.key] {
			continue
		}
		if r.key.kind == flow.Cancel && !present[grabOf(r.key)] {
			w.parked = append(w.parked, r)
			continue
		}
		w.keep(r)
	}
	w.unparkInBatch()
}

// keep adds r to the rows to write and what it moves.
func (w *flowBatch) keep(r newFlow) {
	w.present[r.key] = true // a repeat within the batch is skipped too
	w.fresh = append(w.fresh, r)
	if r.key.kind == flow.Grab {
		w.delta[r.key.id] -= r.num
		w.grabbed = append(w.grabbed, any(r.key.requestID))
	} else {
		w.delta[r.key.id] += r.num
	}
}

// appendRow appends the column values of row r (flowColumns' order) to args.
func (w *flowBatch) appendRow(args []any, r newFlow) []any {
	args = append(args, w.events[r.event][:]...)
	// Integers below 256 (a type, a shard, most nums) are boxed without an allocation.
	return append(args, r.key.id.PromoID, int64(r.key.id.Type), r.num, int64(r.shard), int64(r.bucket), int64(r.buckets), r.noIP, r.amount, r.parts)
}

// insertFresh writes w.fresh, in the largest prepared INSERTs that fit.
func (w *flowBatch) insertFresh(ctx context.Context, tx *sql.Tx, st *flowStmts) error {
	for rows := w.fresh; len(rows) > 0; {
		n := min(len(rows), flowBucketMax) // the largest statement that fits
		if n >= flowInsertStep {
			n -= n % flowInsertStep
		}
		chunk := rows[:n]
		rows = rows[n:]
		args := w.args[:0]
		for _, r := range chunk {
			args = w.appendRow(args, r)
		}
		w.args = args
		if _, err := tx.StmtContext(ctx, st.insert[n]).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("insert flows: %d rows from %s %s: %w", len(chunk), chunk[0].key.kind, chunk[0].key.requestID, err)
		}
	}
	return nil
}

// netRemaining moves the batch's promotions' remaining: one UPDATE for up to
// flowPromoMax of them, which InnoDB runs along the primary key; several in the
// primary key's order, so two writers (the sink's batches, its owed-CANCEL pass)
// lock the promotion rows in the same order and cannot deadlock on them.
func (w *flowBatch) netRemaining(ctx context.Context, tx *sql.Tx, st *flowStmts) error {
	for id, d := range w.delta {
		w.promos = append(w.promos, promoDelta{id, d})
	}
	slices.SortFunc(w.promos, func(a, b promoDelta) int {
		return cmp.Or(strings.Compare(a.id.PromoID, b.id.PromoID), cmp.Compare(a.id.Type, b.id.Type))
	})
	for promos := range slices.Chunk(w.promos, flowPromoMax) {
		b := bits.Len(uint(len(promos) - 1)) // the smallest bucket that holds them
		args := w.args[:0]
		for i := range 1 << b {
			p := promos[min(i, len(promos)-1)] // padded with the last: its WHEN repeated changes nothing
			args = append(args, p.id.PromoID, int64(p.id.Type), p.d)
		}
		for i := range 1 << b {
			p := promos[min(i, len(promos)-1)]
			args = append(args, p.id.PromoID, int64(p.id.Type))
		}
		w.args = args
		if _, err := tx.StmtContext(ctx, st.update[b]).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("insert flows: remaining of %d promotions from %s: %w", len(promos), promos[0].id, err)
		}
	}
	return nil
}

// insertChunk bounds the rows of one INSERT elsewhere (owed.go, hold.go).
const insertChunk = 500

// flowBuckets is how many sizes the lookup comes in: 1, 2, 4, ... flowBucketMax
// request ids. The INSERT comes in 1 ... flowInsertStep-1 rows and every multiple
// of flowInsertStep up to flowBucketMax (47 statements); the largest carries
// 17 × 512 = 8,704 placeholders, well under MySQL's 65,535.
// The UPDATE of remaining comes in 1, 2, 4, ... flowPromoMax promotions.
const (
	flowBuckets      = 10
	flowBucketMax    = 1 << (flowBuckets - 1)
	flowInsertStep   = 16
	flowPromoBuckets = 7
	flowPromoMax     = 1 << (flowPromoBuckets - 1)
)

// flowColumns are grab_flow's columns as InsertFlows writes them: the event's
// first (eventColumns of them, the same for each of its items), then the item's.
const (
	flowColumns  = "event_id, kind, request_id, pin, ip, occurred_at, body_hash, reason, index_shard, channel, promo_id, promo_type, num, shard, bucket, buckets, no_ip, amount, parts"
	eventColumns = 10
	rowColumns   = eventColumns + 9
)

// flowStmts are InsertFlows' statements, prepared on first use. A *sql.Stmt is
// prepared again on each connection it runs on (database/sql keeps one per
// connection), and a transaction takes the one of its connection (Tx.StmtContext).
type flowStmts struct {
	mu     sync.Mutex
	ready  bool
	insert [flowBucketMax + 1]*sql.Stmt // insert[n] writes n rows (nil: no statement of n rows)
	lookup [flowBuckets]*sql.Stmt       // lookup[b] looks up 1<<b request ids
	update [flowPromoBuckets]*sql.Stmt  // update[b] nets 1<<b promotions
	// spare is the scratch of the last batch, for the next: sequential batches (the
	// flow sink's) reuse one, grown once, which a sync.Pool would drop at every GC.
	spare atomic.Pointer[flowBatch]
}

// statements are InsertFlows' statements, prepared on the first call.
func (fl *Flows) statements(ctx context.Context) (*flowStmts, error) {
	f := &fl.stmts
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ready {
		return f, nil
	}
	prepare := func(q string) (*sql.Stmt, error) {
		st, err := fl.db.PrepareContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("insert flows: prepare: %w", err)
		}
		return st, nil
	}
	var err error
	for n := 1; n <= flowBucketMax && err == nil; n++ {
		if n < flowInsertStep || n%flowInsertStep == 0 {
			f.insert[n], err = prepare(`INSERT INTO grab_flow (` + flowColumns + `) VALUES ` + placeholders(n, rowColumns))
		}
	}
	for b := range flowBuckets {
		if err != nil {
			break
		}
		n := 1 << b
		if f.lookup[b], err = prepare(`SELECT request_id, kind, promo_id, promo_type FROM grab_flow WHERE request_id IN (` +
			strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + `)`); err != nil {
			break
		}
	}
	for b := range flowPromoBuckets {
		if err != nil {
			break
		}
		n := 1 << b
		f.update[b], err = prepare(`UPDATE promotion SET remaining = remaining + CASE` +
			strings.Repeat(` WHEN promo_id = ? AND promo_type = ? THEN ?`, n) +
			` ELSE 0 END WHERE (promo_id, promo_type) IN (` + placeholders(n, 2) + `)`)
	}
	if err != nil {
		f.closeLocked()
		return nil, err
	}
	f.ready = true
	return f, nil
}

// close releases the statements (Store.Close).
func (f *flowStmts) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeLocked()
}

func (f *flowStmts) closeLocked() {
	for _, st := range slices.Concat(f.insert[:], f.lookup[:], f.update[:]) {
		if st != nil {
			_ = st.Close()
		}
	}
	f.insert, f.lookup, f.update, f.ready = [flowBucketMax + 1]*sql.Stmt{}, [flowBuckets]*sql.Stmt{}, [flowPromoBuckets]*sql.Stmt{}, false
}

// placeholders is n rows of cols placeholders each: (?, ?), (?, ?).
func placeholders(n, cols int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// flowKey is grab_flow's unique key.
type flowKey struct {
	requestID string
	kind      flow.Kind
	id        ID
}

// newFlow is one grab_flow row to write: one item of one event.
type newFlow struct {
	key   flowKey
	event int // the event's column values: flowBatch.events[event]
	num   int64
	shard int
	// bucket and buckets: where the units came from, of how many (1 for an
	// ordinary promotion)
	bucket, buckets int
	noIP            int64 // 1: the grab counted its ip nowhere (flow.Item.NoIP)
	// amount and parts: an envelope pool's item, the sum of its parts and their
	// idx as grab_flow keeps them (flow.FormatParts); both nil, NULL, for any other
	amount, parts any
}

// flowBatch is the scratch of one InsertFlows: its slices and maps are reused by
// the next batch, so a batch allocates little beyond its arguments.
type flowBatch struct {
	rows    []newFlow
	events  [][eventColumns]any // each event's column values, boxed once for all its rows
	ids     []any               // the request ids to look up, once each
	seen    map[string]string   // request id -> the batch's copy of it
	present map[flowKey]bool
	fresh   []newFlow
	delta   map[ID]int64
	promos  []promoDelta
	args    []any
	holds   []holdWrite // the batch's GRABs with a hold, and its CONFIRMs
	parked  []newFlow   // CANCELs before their GRAB, kept in grab_flow_early (early.go)
	grabbed []any       // request ids of the GRABs written, whose early CANCELs come in
}

type promoDelta struct {
	id ID
	d  int64
}

// batch is the spare scratch, or a new one when another call holds it.
func (f *flowStmts) batch() *flowBatch {
	if w := f.spare.Swap(nil); w != nil {
		return w
	}
	return &flowBatch{seen: map[string]string{}, present: map[flowKey]bool{}, delta: map[ID]int64{}}
}

// release clears what the batch referred to (the events' strings) and keeps it as
// the spare.
func (f *flowStmts) release(w *flowBatch) {
	clear(w.rows)
	clear(w.events)
	clear(w.ids)
	clear(w.fresh)
	clear(w.promos)
	clear(w.args)
	clear(w.holds)
	clear(w.parked)
	clear(w.grabbed)
	w.rows, w.events, w.ids, w.fresh, w.promos, w.args, w.holds = w.rows[:0], w.events[:0], w.ids[:0], w.fresh[:0], w.promos[:0], w.args[:0], w.holds[:0]
	w.parked, w.grabbed = w.parked[:0], w.grabbed[:0]
	clear(w.seen)
	clear(w.present)
	clear(w.delta)
	f.spare.Store(w)
}

// Boxed once: the kinds as grab_flow's ENUM takes them.
var kindArg = map[flow.Kind]any{flow.Grab: string(flow.Grab), flow.Cancel: string(flow.Cancel)}

// channelArg is a GRAB's channel as grab_flow.channel takes it (migration 0016):
// NULL when the grab named none, the name boxed once otherwise. Only a GRAB
// carries one; Decode has checked it is a channel of the contract.
func channelArg(e *flow.Event) any {
	if e.Kind != flow.Grab || e.Channel == "" {
		return nil
	}
	if v, ok := channelArgs[e.Channel]; ok {
		return v
	}
	return e.Channel // MySQL refuses it, as it should
}

var channelArgs = func() map[string]any {
	m := map[string]any{}
	for _, n := range promo.AllChannels() {
		m[n] = n
	}
	return m
}()

// rowsOf makes the batch's rows (an event's items, in order) and the request ids to
// look up.
func (w *flowBatch) rowsOf(events []flow.Event) error {
	for i := range events {
		e := &events[i]
		at, err := time.Parse(time.RFC3339Nano, e.OccurredAt)
		if err != nil {
			return fmt.Errorf("insert flows: event %s: occurredAt: %w", e.EventID, err)
		}
		indexShard := ring.Default.Shard(promo.RequestIndexKey(e.RequestID)) // migration 0003
		if e.Kind == flow.Confirm {
			// It moves no stock: a grab_hold row, no grab_flow row.
			w.holds = append(w.holds, holdWrite{requestID: e.RequestID, indexShard: indexShard, confirmedAt: at.UTC()})
			continue
		}
		if e.HoldUntil != 0 {
			w.holds = append(w.holds, holdWrite{requestID: e.RequestID, indexShard: indexShard, untilMs: e.HoldUntil})
		}
		kind, ok := kindArg[e.Kind]
		if !ok {
			kind = string(e.Kind) // MySQL refuses it, as it did
		}
		var hash, reason string // migration 0002's columns: a GRAB's hash, a CANCEL's reason
		if e.Kind == flow.Grab {
			hash = e.BodyHash
		} else {
			reason = e.Reason
		}
		requestID := any(e.RequestID)
		w.events = append(w.events, [eventColumns]any{e.EventID, kind, requestID, e.Pin, e.IP, at.UTC(), hash, reason, int64(indexShard), channelArg(e)})
		if _, ok := w.seen[e.RequestID]; !ok {
			w.seen[e.RequestID] = e.RequestID
			w.ids = append(w.ids, requestID)
		}
		for _, it := range e.Items {
			r := newFlow{key: flowKey{e.RequestID, e.Kind, ID{it.PromoID, it.Type}}, event: len(w.events) - 1, num: it.Num, shard: it.Shard, bucket: it.Bucket, buckets: max(it.Buckets, 1)}
			if it.NoIP {
				r.noIP = 1
			}
			if len(it.Parts) > 0 {
				r.amount, r.parts = it.Amount, flow.FormatParts(it.Parts)
			}
			w.rows = append(w.rows, r)
		}
	}
	return nil
}

// lookUpPresent fills w.present with the rows present of the batch's requests, of
// any kind and promotion, by their unique key.
func (w *flowBatch) lookUpPresent(ctx context.Context, tx *sql.Tx, st *flowStmts) error {
	for ids := range slices.Chunk(w.ids, flowBucketMax) {
		b := bits.Len(uint(len(ids) - 1)) // the smallest bucket that holds them
		args := append(w.args[:0], ids...)
		for len(args) < 1<<b {
			args = append(args, ids[len(ids)-1])
		}
		w.args = args
		res, err := tx.StmtContext(ctx, st.lookup[b]).QueryContext(ctx, args...)
		if err != nil {
			return fmt.Errorf("insert flows: look up present rows: %w", err)
		}
		var rid, kind, promoID sql.RawBytes
		var typ int64
		for res.Next() {
			if err := res.Scan(&rid, &kind, &promoID, &typ); err != nil {
				res.Close()
				return fmt.Errorf("insert flows: look up present rows: %w", err)
			}
			k := flowKey{id: ID{string(promoID), int(typ)}}
			switch string(kind) {
			case string(flow.Grab):
				k.kind = flow.Grab
			case string(flow.Cancel):
				k.kind = flow.Cancel
			default:
				k.kind = flow.Kind(kind)
			}
			var ok bool
			if k.requestID, ok = w.seen[string(rid)]; !ok {
				k.requestID = string(rid)
			}
			w.present[k] = true
		}
		if err := res.Close(); err != nil {
			return fmt.Errorf("insert flows: look up present rows: %w", err)
		}
		if err := res.Err(); err != nil {
			return fmt.Errorf("insert flows: look up present rows: %w", err)
		}
	}
	return nil
}

// HasGrab reports whether the GRAB of requestID for the promotion is in the log:
// the reconciler's back-query before it returns an open take.
func (f *Flows) HasGrab(ctx context.Context, requestID, promoID string, typ int) (bool, error) {
	var one int
	err := f.db.GetContext(ctx, &one, `SELECT 1 FROM grab_flow WHERE request_id = ? AND kind = 'GRAB' AND promo_id = ? AND promo_type = ?`, requestID, promoID, typ)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("has grab %s: %w", requestID, err)
	}
	return true, nil
}

// GrabItems returns the pin, ip and items of requestID's GRAB as the log holds them,
// an envelope pool's item with the amount and parts it took.
func (f *Flows) GrabItems(ctx context.Context, requestID string) (pin, ip string, items []flow.Item, err error) {
	var rows []struct {
		Pin     string         `db:"pin"`
		IP      string         `db:"ip"`
		PromoID string         `db:"promo_id"`
		Type    int            `db:"promo_type"`
		Num     int64          `db:"num"`
		Shard   int            `db:"shard"`
		Bucket  int            `db:"bucket"`
		Buckets int            `db:"buckets"`
		NoIP    bool           `db:"no_ip"`
		Amount  sql.NullInt64  `db:"amount"`
		Parts   sql.NullString `db:"parts"`
	}
	if err := f.db.SelectContext(ctx, &rows, `SELECT pin, ip, promo_id, promo_type, num, shard, bucket, buckets, no_ip, amount, parts FROM grab_flow WHERE request_id = ? AND kind = 'GRAB' ORDER BY id`, requestID); err != nil {
		return "", "", nil, fmt.Errorf("grab items %s: %w", requestID, err)
	}
	for _, r := range rows {
		pin, ip = r.Pin, r.IP
		it := flowItem(r.PromoID, r.Type, r.Num, r.Shard, r.Bucket, r.Buckets, r.NoIP)
		if r.Parts.Valid {
			if it.Parts, err = flow.ParseParts(r.Parts.String); err != nil {
				return "", "", nil, fmt.Errorf("grab items %s: %w", requestID, err)
			}
			it.Amount = r.Amount.Int64
		}
		items = append(items, it)
	}
	return pin, ip, items, nil
}

// GrantedByRecord is the contract's sum: what a promotion has granted, by the log.
func (f *Flows) GrantedByRecord(ctx context.Context, promoID string, typ int) (int64, error) {
	var n int64
	err := f.db.GetContext(ctx, &n, `SELECT COALESCE(SUM(CASE kind WHEN 'GRAB' THEN num ELSE -num END), 0) FROM grab_flow WHERE promo_id = ? AND promo_type = ?`, promoID, typ)
	if err != nil {
		return 0, fmt.Errorf("granted by record %s_%d: %w", promoID, typ, err)
	}
	return n, nil
}

// flowItem is a flow event item as a grab_flow row holds it; an ordinary
// promotion's (one bucket) leaves Bucket, Buckets and NoIP out, as its producer did.
func flowItem(promoID string, typ int, num int64, shard, bucket, buckets int, noIP bool) flow.Item {
	it := flow.Item{PromoID: promoID, Type: typ, Num: num, Shard: shard}
	if buckets > 1 {
		it.Bucket, it.Buckets, it.NoIP = bucket, buckets, noIP
	}
	return it
}
