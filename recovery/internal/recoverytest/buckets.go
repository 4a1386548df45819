package recoverytest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/lua"
)

// IDWithBucketOn returns prefix-<n> for the first n whose promotion key (type 1)
// in k buckets has bucket b on shard.
func IDWithBucketOn(prefix string, k, b, shard int) string {
	for n := 0; ; n++ {
		id := prefix + "-" + strconv.Itoa(n)
		if bucket.LayoutOf(ring.Default, promo.Key(id, 1), k).Shards[b] == shard {
			return id
		}
	}
}

// Bucketed is a grab of a bucketed promotion as the sale took it: the bucket its
// units came from.
type Bucketed struct {
	RID, Pin, IP, Key string
	K                 int
	Num               int64
	Stock             int
	// NoIP: the grab counted the ip nowhere, as grab-service's do while the
	// promotion has no ip limit (flow.Item.NoIP).
	NoIP bool
}

// GrabBucketed grabs num units of the promotion key in k buckets as grab-service
// does: the pin's home bucket first, then the next ones in turn while the stock
// bucket answers SOLD_OUT; each attempt takes every part (bucket.Layout.Parts), one
// q.lua call per part's shard, and undoes the parts taken when one refuses. A take
// is published as one GRAB (the stock bucket's shard, bucket and buckets), then
// committed on every part. It answers whether units were granted, from which
// bucket, and the refusal's code otherwise.
func (s *Sale) GrabBucketed(ctx context.Context, rid, pin, ip, key string, k int, num int64) (Bucketed, bool, lua.Code, error) {
	l := bucket.LayoutOf(ring.Default, key, k)
	perIP, err := s.Shards[l.Shards[0]].HGet(ctx, key, "perIp").Int64()
	if err != nil {
		return Bucketed{}, false, 0, fmt.Errorf("perIp of %s: %w", key, err)
	}
	g := Bucketed{RID: rid, Pin: pin, IP: ip, Key: key, K: k, Num: num, NoIP: perIP == 0}
	hash := BodyHash(rid, pin, ip, key, num)
	home := bucket.Home(pin, k)
	for i := range k {
		g.Stock = (home + i) % k
		parts := l.Parts(g.Stock, pin, ip, g.NoIP)
		now := time.Now()
		code, err := s.takeParts(ctx, parts, k, lua.GrabCall{NowMs: now.UnixMilli(), DeadlineMs: now.Add(3 * time.Second).UnixMilli(),
			RequestID: rid, BodyHash: hash, Pin: pin, IP: ip, RateFactorPermille: 1000}, num)
		if err != nil || code == lua.CodeSoldOut {
			if err != nil {
				return g, false, code, err
			}
			continue
		}
		if code != lua.CodeOK {
			return g, false, code, nil
		}
		ev := flow.Event{EventID: eventID(), Kind: flow.Grab, RequestID: rid, Pin: pin, IP: ip,
			Items: []flow.Item{bucketItem(l, g)}, OccurredAt: flow.Stamp(now), BodyHash: hash}
		if err := s.Publish(ctx, ev); err != nil {
			return g, false, code, fmt.Errorf("publish %s: %w", rid, err)
		}
		for _, p := range parts {
			if c, err := lua.Commit(ctx, s.Shards[p.Shard], rid, []string{p.Key}); err != nil || c != lua.CommitCommitted {
				return g, false, code, fmt.Errorf("commit %s on %s: %v %w", rid, p.Key, c, err)
			}
		}
		return g, true, code, nil
	}
	return g, false, lua.CodeSoldOut, nil
}

// takeParts takes every part or none: the parts taken before a refusal are undone.
func (s *Sale) takeParts(ctx context.Context, parts []bucket.PartKey, k int, call lua.GrabCall, num int64) (lua.Code, error) {
	for i, p := range parts {
		call.Items = []lua.GrabItem{{Key: p.Key, Num: num, Part: p.Letters, Buckets: k}}
		r, err := lua.Grab(ctx, s.Shards[p.Shard], call)
		if err == nil && r.Code == lua.CodeOK {
			continue
		}
		for _, q := range parts[:i] {
			if _, uerr := lua.Return(ctx, s.Shards[q.Shard], lua.ReturnCall{RequestID: call.RequestID, Mode: lua.ReturnUndo,
				NowMs: call.NowMs, Keys: []string{q.Key}}); uerr != nil && err == nil {
				err = uerr
			}
		}
		return r.Code, err
	}
	return lua.CodeOK, nil
}

// CancelBucketed returns a granted bucketed grab: cancel on every part's shard, the
// CANCEL published (units back to the stock bucket), then every part finalized.
func (s *Sale) CancelBucketed(ctx context.Context, g Bucketed, reason string) error {
	l := bucket.LayoutOf(ring.Default, g.Key, g.K)
	parts := l.Parts(g.Stock, g.Pin, g.IP, g.NoIP)
	now := time.Now()
	for _, p := range parts {
		r, err := lua.Return(ctx, s.Shards[p.Shard], lua.ReturnCall{RequestID: g.RID, Pin: g.Pin, Mode: lua.ReturnCancel, Reason: reason,
			NowMs: now.UnixMilli(), Keys: []string{p.Key}})
		if err != nil || r.Code != lua.ReturnReturned {
			return fmt.Errorf("cancel %s on %s: %v %w", g.RID, p.Key, r.Code, err)
		}
	}
	ev := flow.Event{EventID: eventID(), Kind: flow.Cancel, RequestID: g.RID, Pin: g.Pin, IP: g.IP,
		Items: []flow.Item{bucketItem(l, g)}, OccurredAt: flow.Stamp(now), Reason: reason}
	if err := s.Publish(ctx, ev); err != nil {
		return fmt.Errorf("publish the cancel of %s: %w", g.RID, err)
	}
	for _, p := range parts {
		if _, err := lua.Return(ctx, s.Shards[p.Shard], lua.ReturnCall{RequestID: g.RID, Mode: lua.ReturnFinalize,
			NowMs: now.UnixMilli(), Keys: []string{p.Key}}); err != nil {
			return fmt.Errorf("finalize %s on %s: %w", g.RID, p.Key, err)
		}
	}
	return nil
}

// bucketItem is the flow item of bucketed grab g: the stock bucket's shard, the
// bucket, the bucket count and whether the ip was counted.
func bucketItem(l bucket.Layout, g Bucketed) flow.Item {
	id, typ, _ := promo.ParseKey(g.Key)
	return flow.Item{PromoID: id, Type: typ, Num: g.Num, Shard: l.Shards[g.Stock], Bucket: g.Stock, Buckets: l.K, NoIP: g.NoIP}
}
