package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
)

// seedPromotion writes a committed promotion row whose remaining already counts
// the granted units, as the flow sink would have left it.
func seedPromotion(ctx context.Context, rec *store.Store, id string, total, granted int64) error {
	now := time.Now().UTC()
	spec := promo.Spec{PromoID: id, Type: 1, Title: "bench recovery", Total: total, MaxPerGrab: 1,
		StartAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour)}
	p := store.NewPromotion(spec, promo.Active, now)
	if err := rec.Promotions.Insert(ctx, p); err != nil {
		return err
	}
	if _, err := rec.Promotions.Promote(ctx, p.ID(), 1, now); err != nil {
		return err
	}
	_, err := rec.DB().ExecContext(ctx, `UPDATE promotion SET remaining = ? WHERE promo_id = ? AND promo_type = 1`, total-granted, id)
	return err
}

// seedRowsPerInsert bounds one INSERT (9 placeholders a row, well under 65,535).
const seedRowsPerInsert = 2000

// seedFlows writes rows GRAB rows of one unit each, with the columns the flow sink
// fills (body hash and index shard included, so the rebuild also restores the
// request index entries that lived on the shard), in multi-row INSERTs, showing
// progress.
func seedFlows(ctx context.Context, s *scratchDB, id string, rows int) error {
	shard := shardOf(id)
	bar := newBar(fmt.Sprintf("seed %d flow rows", rows), rows)
	at := time.Now().UTC().Add(-time.Minute)
	var q strings.Builder
	args := make([]any, 0, seedRowsPerInsert*9)
	ev := make([]byte, 8)
	for done := 0; done < rows; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(seedRowsPerInsert, rows-done)
		q.Reset()
		args = args[:0]
		q.WriteString(`INSERT INTO grab_flow (event_id, kind, request_id, pin, ip, promo_id, promo_type, num, shard, occurred_at, body_hash, index_shard) VALUES `)
		for k := done; k < done+n; k++ {
			if k > done {
				q.WriteString(",")
			}
			q.WriteString("(?, 'GRAB', ?, ?, ?, ?, 1, 1, ?, ?, ?, ?)")
			_, _ = rand.Read(ev)
			kk := int64(k)
			rid := seedRequestID(id, k)
			args = append(args, hex.EncodeToString(ev)+strconv.Itoa(k), rid,
				"p"+strconv.FormatInt(kk%pinPool, 10), "198.18."+strconv.FormatInt(kk/250%250, 10)+"."+strconv.FormatInt(kk%250+1, 10),
				id, shard, at, "h"+strconv.Itoa(k), ring.Default.Shard(promo.RequestIndexKey(rid)))
		}
		if _, err := s.DB.ExecContext(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("seed flow rows: %w", err)
		}
		done += n
		if bar != nil {
			_ = bar.Add(n)
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	return nil
}

// seedRequestID is the request id of seeded row k of promotion id.
func seedRequestID(id string, k int) string { return id + "-r" + strconv.Itoa(k) }
