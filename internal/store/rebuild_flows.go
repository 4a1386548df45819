package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/flashsale/platform/internal/flow"
)

// Rebuild is the record as a shard rebuild and verify read it: the live
// promotions, their flow log, request index entries and envelope pools.
type Rebuild struct {
	db *sqlx.DB
}

// FlowCounters is what the flow log says a promotion's Redis counters hold.
type FlowCounters struct {
	Granted  int64            // Σ num of GRAB rows
	Returned int64            // Σ num of CANCEL rows
	Pins     map[string]int64 // pin -> Σ GRAB − Σ CANCEL, zero nets left out
	IPs      map[string]int64 // ip -> Σ GRAB − Σ CANCEL of the rows that counted it, zero nets left out
	// ByBucket is Σ GRAB − Σ CANCEL by the bucket the units came from (went back
	// to): what each bucket of a bucketed promotion holds granted. An ordinary
	// promotion's is all bucket 0's. A pin's and an ip's counts live on their home
	// buckets (bucket.Home), which the caller finds from Pins and IPs.
	ByBucket map[int]int64
}

// Net is what the promotion holds granted by the record: the contract's sum.
func (c FlowCounters) Net() int64 { return c.Granted - c.Returned }

// FlowCounters sums the flow log of one promotion.
func (s *Rebuild) FlowCounters(ctx context.Context, id ID) (FlowCounters, error) {
	out := FlowCounters{Pins: map[string]int64{}, IPs: map[string]int64{}, ByBucket: map[int]int64{}}
	var kinds []struct {
		Kind   string `db:"kind"`
		Bucket int    `db:"bucket"`
		Sum    int64  `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &kinds, `SELECT kind, bucket, COALESCE(SUM(num), 0) AS n FROM grab_flow
 WHERE promo_id = ? AND promo_type = ? GROUP BY kind, bucket`, id.PromoID, id.Type); err != nil {
		return out, fmt.Errorf("store: flow counters %s: %w", id, err)
	}
	for _, k := range kinds {
		if k.Kind == "GRAB" {
			out.Granted += k.Sum
			out.ByBucket[k.Bucket] += k.Sum
		} else {
			out.Returned += k.Sum
			out.ByBucket[k.Bucket] -= k.Sum
		}
	}
	// A grab that counted its ip nowhere (no_ip) is in the pins' sums alone.
	for col, dst := range map[string]map[string]int64{"pin": out.Pins, "ip": out.IPs} {
		var nets []struct {
			Who string `db:"who"`
			Net int64  `db:"net"`
		}
		where := ""
		if col == "ip" {
			where = " AND no_ip = 0"
		}
		// col and where are constants above, never input.
		q := `SELECT ` + col + ` AS who, SUM(CASE kind WHEN 'GRAB' THEN num ELSE -num END) AS net
 FROM grab_flow WHERE promo_id = ? AND promo_type = ?` + where + ` GROUP BY ` + col + ` HAVING net <> 0`
		if err := s.db.SelectContext(ctx, &nets, q, id.PromoID, id.Type); err != nil {
			return out, fmt.Errorf("store: flow counters %s by %s: %w", id, col, err)
		}
		for _, n := range nets {
			dst[n.Who] = n.Net
		}
	}
	return out, nil
}

// FlowRow is one row of a promotion's flow log as a rebuild reads it.
type FlowRow struct {
	Cancel    bool // a CANCEL row; a GRAB otherwise
	RequestID string
	Pin, IP   string
	Num       int64
	BodyHash  string // a GRAB's request body fingerprint ('' if unknown)
	Reason    string // a CANCEL's reason ('' if unknown)
	// Bucket is the bucket the units came from (went back to), of Buckets (1 for
	// an ordinary promotion).
	Bucket, Buckets int
	// NoIP: the grab counted its ip nowhere (flow.Item.NoIP); its parts are the
	// stock bucket's and the pin's home's alone.
	NoIP bool
	// Amount and Parts: an envelope pool's row, the sum of the parts it took (gave
	// back) and their idx; 0 and nil for a row of no pool, or a pool's CANCEL
	// published without them (EnvelopePool reads it as giving back its GRAB's).
	Amount int64
	Parts  []int
}

const flowRowColumns = `kind = 'CANCEL', request_id, pin, ip, num, body_hash, reason, bucket, buckets, no_ip, amount, parts`

// flowScanner reads FlowRows with one allocation per row: the strings of a row
// are slices of one string, not five of their own (a rebuild reads millions). The
// two integers are scanned as the driver gives them: into an int64 database/sql
// would convert by reflection, a fifth of the scan.
type flowScanner struct {
	cancel, num, bucket, buckets, noIP, amount any
	raw                                        [5]sql.RawBytes // request_id, pin, ip, body_hash, reason
	parts                                      sql.RawBytes    // nil for NULL: a row of no pool
	buf                                        []byte
}

func (f *flowScanner) scan(rows *sql.Rows) (FlowRow, error) {
	r := &f.raw
	if err := rows.Scan(&f.cancel, &r[0], &r[1], &r[2], &f.num, &r[3], &r[4], &f.bucket, &f.buckets, &f.noIP, &f.amount, &f.parts); err != nil {
		return FlowRow{}, err
	}
	cancel, err := driverInt(f.cancel)
	if err != nil {
		return FlowRow{}, fmt.Errorf("kind: %w", err)
	}
	num, err := driverInt(f.num)
	if err != nil {
		return FlowRow{}, fmt.Errorf("num: %w", err)
	}
	bucket, err := driverInt(f.bucket)
	if err != nil {
		return FlowRow{}, fmt.Errorf("bucket: %w", err)
	}
	buckets, err := driverInt(f.buckets)
	if err != nil {
		return FlowRow{}, fmt.Errorf("buckets: %w", err)
	}
	noIP, err := driverInt(f.noIP)
	if err != nil {
		return FlowRow{}, fmt.Errorf("no_ip: %w", err)
	}
	var amount int64
	var envParts []int
	if f.parts != nil {
		if envParts, err = flow.ParseParts(string(f.parts)); err != nil {
			return FlowRow{}, err
		}
		if f.amount != nil {
			if amount, err = driverInt(f.amount); err != nil {
				return FlowRow{}, fmt.Errorf("amount: %w", err)
			}
		}
	}
	f.buf = f.buf[:0]
	for _, b := range r {
		f.buf = append(f.buf, b...)
	}
	all := string(f.buf)
	var parts [len(f.raw)]string
	off := 0
	for i, b := range r {
		parts[i] = all[off : off+len(b)]
		off += len(b)
	}
	return FlowRow{Cancel: cancel == 1, RequestID: parts[0], Pin: parts[1], IP: parts[2], Num: num, BodyHash: parts[3], Reason: parts[4],
		Bucket: int(bucket), Buckets: int(buckets), NoIP: noIP == 1, Amount: amount, Parts: envParts}, nil
}

// driverInt reads a signed integer column as the MySQL driver gives it: an int64,
// from prepared statements and interpolated queries alike (go-sql-driver 1.8 on).
func driverInt(v any) (int64, error) {
	if n, ok := v.(int64); ok {
		return n, nil
	}
	return 0, fmt.Errorf("unexpected %T from the driver", v)
}

// EachFlow streams a promotion's flow log, GRAB and CANCEL rows alike, in no
// particular order and in one pass: a rebuild folds it into counters and ledger as
// it reads, so a promotion with millions of grants costs one scan of its rows and
// little memory. fn's error stops the walk and is returned.
func (s *Rebuild) EachFlow(ctx context.Context, id ID, fn func(FlowRow) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT `+flowRowColumns+` FROM grab_flow
 WHERE promo_id = ? AND promo_type = ?`, id.PromoID, id.Type)
	if err != nil {
		return fmt.Errorf("store: flow log of %s: %w", id, err)
	}
	defer rows.Close()
	var f flowScanner
	for rows.Next() {
		r, err := f.scan(rows)
		if err != nil {
			return fmt.Errorf("store: flow log of %s: %w", id, err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: flow log of %s: %w", id, err)
	}
	return nil
}

// GrabRows returns the GRAB rows of some requests of a promotion, by request id
// (one lookup per request on the grab_flow_request key); a request with no GRAB row
// is absent from the map.
func (s *Rebuild) GrabRows(ctx context.Context, id ID, requestIDs []string) (map[string]FlowRow, error) {
	out := make(map[string]FlowRow, len(requestIDs))
	if len(requestIDs) == 0 {
		return out, nil
	}
	q, args, err := sqlx.In(`SELECT `+flowRowColumns+` FROM grab_flow
 WHERE request_id IN (?) AND kind = 'GRAB' AND promo_id = ? AND promo_type = ?`, requestIDs, id.PromoID, id.Type)
	if err != nil {
		return nil, fmt.Errorf("store: grab rows of %s: %w", id, err)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: grab rows of %s: %w", id, err)
	}
	defer rows.Close()
	var f flowScanner
	for rows.Next() {
		r, err := f.scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: grab rows of %s: %w", id, err)
		}
		out[r.RequestID] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: grab rows of %s: %w", id, err)
	}
	return out, nil
}

// IndexEntry is a request index entry as the record knows it: a request's GRAB rows.
type IndexEntry struct {
	RequestID string
	flow.RequestIndex
	At time.Time // the GRAB's occurredAt: the entry lives RequestIndexTTL from then
}

// EachIndexEntry streams the request index entries whose key lives on shard, of the
// GRABs that occurred at or after since, one per request in request id order (every
// item of a multi-item request in one entry). An entry names where the items live,
// as grab-service's claim writes it before the take: without an envelope pool's
// amount and parts, which the ledger holds. Rows written before migration 0003
// carry no index shard and are not found. fn's error stops the walk.
func (s *Rebuild) EachIndexEntry(ctx context.Context, shard int, since time.Time, fn func(IndexEntry) error) error {
	// Without the hint MariaDB scans the whole log and sorts (1.4 s for a million rows
	// against 0.4 s by the index, which also gives the order).
	// The hold's deadline (migration 0008) comes along: a confirm of a rebuilt held
	// grant knows from its entry that it was held.
	rows, err := s.db.QueryContext(ctx, `SELECT f.request_id, f.pin, f.ip, f.body_hash, f.promo_id, f.promo_type, f.num, f.shard, f.bucket, f.buckets, f.no_ip, f.occurred_at, COALESCE(h.hold_until_ms, 0)
 FROM grab_flow f FORCE INDEX (grab_flow_index) LEFT JOIN grab_hold h ON h.request_id = f.request_id
 WHERE f.index_shard = ? AND f.kind = 'GRAB' AND f.occurred_at >= ? ORDER BY f.request_id, f.id`, shard, since.UTC())
	if err != nil {
		return fmt.Errorf("store: request index of shard %d: %w", shard, err)
	}
	defer rows.Close()
	var cur IndexEntry
	for rows.Next() {
		var r IndexEntry
		var it flow.Item
		var bucket, buckets int
		var noIP bool
		if err := rows.Scan(&r.RequestID, &r.Pin, &r.IP, &r.BodyHash, &it.PromoID, &it.Type, &it.Num, &it.Shard, &bucket, &buckets, &noIP, &r.At, &r.HoldUntilMs); err != nil {
			return fmt.Errorf("store: request index of shard %d: %w", shard, err)
		}
		if r.RequestID != cur.RequestID {
			if cur.RequestID != "" {
				if err := fn(cur); err != nil {
					return err
				}
			}
			cur = r
		}
		cur.Items = append(cur.Items, flowItem(it.PromoID, it.Type, it.Num, it.Shard, bucket, buckets, noIP))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: request index of shard %d: %w", shard, err)
	}
	if cur.RequestID != "" {
		return fn(cur)
	}
	return nil
}
