package adminservice

// A promotion in buckets (internal/bucket) is K hashes on K shards. A change of it
// reaches all of them with bucket 0, the promotion key, as its commit point: the
// journal asks bucket 0 alone whether the change landed, and the other buckets
// follow it. A change another bucket may refuse (a create, a PATCH lowering total)
// is written to the other buckets first and to bucket 0 last, and is undone on
// them when bucket 0 did not take it. A change no bucket refuses once bucket 0
// took it (a stop, a delete, a PATCH not lowering total) is written to bucket 0
// first and completed on the others. docs/CONTRACT.md, "Buckets".

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
)

// buckets writes a change to the buckets other than 0 and reads any bucket's
// hash; the journal decides when (journal_buckets.go).
type buckets struct {
	shards   Shards
	timeout  time.Duration // of each Redis call
	now      clock
	announce *announcer
}

// layoutOf is where the k buckets of id live.
func layoutOf(id store.ID, k int) bucket.Layout { return bucket.LayoutOf(ring.Default, id.Key(), k) }

// share is ch as bucket b of k holds it: its share of the total and of the rate
// limit (rounded up: the window is charged on the pin's home bucket alone), the
// other limits the promotion's.
func share(ch store.Change, b, k int) store.Change {
	ch.Spec.Total = bucket.Shares(ch.Spec.Total, k)[b]
	if rl := ch.Spec.RateLimit; rl != nil {
		ch.Spec.RateLimit = &promo.RateLimit{Limit: bucket.RateShare(rl.Limit, k), WindowSeconds: rl.WindowSeconds}
	}
	return ch
}

// others are the buckets other than 0, in the order a change is written to them:
// a create from the last, so that bucket 1 is its last write but bucket 0.
func others(ch store.Change, k int) []int {
	out := make([]int, 0, k-1)
	for b := 1; b < k; b++ {
		out = append(out, b)
	}
	if ch.Op == store.OpCreate {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// fitShares refuses a total some bucket has already granted more than its share
// of; it reads every bucket and changes nothing.
func (bk *buckets) fitShares(ctx context.Context, l bucket.Layout, total int64) error {
	shares := bucket.Shares(total, l.K)
	for b := range l.Keys {
		h, err := bk.readBucket(ctx, l, b)
		if err != nil {
			return err
		}
		if g := h.Granted(); g > shares[b] {
			return &BelowGrantedError{Total: total, Granted: g, Buckets: l.K, Bucket: b, Shard: l.Shards[b], Share: shares[b]}
		}
	}
	return nil
}

// readBucket reads the hash of bucket b, which the record says exists.
func (bk *buckets) readBucket(ctx context.Context, l bucket.Layout, b int) (lua.HashState, error) {
	ctx, cancel := context.WithTimeout(ctx, bk.timeout)
	defer cancel()
	shard := l.Shards[b]
	h, exists, err := lua.ReadHash(ctx, bk.shards.Client(shard), l.Keys[b])
	if err != nil {
		return lua.HashState{}, &UnavailableError{Dependency: shardName(shard), Msg: fmt.Sprintf("could not read bucket %d (%s)", b, l.Keys[b]), Err: err}
	}
	if !exists {
		return lua.HashState{}, &UnavailableError{Dependency: shardName(shard), Msg: fmt.Sprintf(
			"the shard has no hash for bucket %d (%s) although the record has it; rebuild the shard with bin/recovery", b, l.Keys[b])}
	}
	return h, nil
}

// writeBucket writes ch to bucket b (b > 0) and announces the sale state changes
// it made; the error is the shard's silence or its refusal.
func (bk *buckets) writeBucket(ctx context.Context, l bucket.Layout, b int, ch store.Change) error {
	shard, c := l.Shards[b], bk.shards.Client(l.Shards[b])
	rctx, cancel := context.WithTimeout(ctx, bk.timeout)
	reply, err := writeHash(rctx, c, shard, l.Keys[b], share(ch, b, l.K), nil, bk.now.now().UnixMilli())
	cancel()
	if err != nil {
		return &UnavailableError{Dependency: shardName(shard), Msg: fmt.Sprintf("bucket %d did not answer", b), Err: err}
	}
	bk.announce.announce(ctx, c, reply.Changes)
	return judgeBucket(l, b, ch, reply)
}

// judgeBucket is judge for bucket b; BELOW_GRANTED names the bucket.
func judgeBucket(l bucket.Layout, b int, ch store.Change, r lua.AdminReply) error {
	err := judge(share(ch, b, l.K), r, l.Shards[b])
	var bg *BelowGrantedError
	if errors.As(err, &bg) {
		return &BelowGrantedError{Total: ch.Spec.Total, Granted: bg.Granted, Buckets: l.K, Bucket: b, Shard: l.Shards[b], Share: bg.Total}
	}
	return err
}

// follow brings the buckets other than 0 to bucket 0's side of ch: completes ch
// on them if bucket 0 holds it (landed), else undoes it. committed is the row
// before ch. Every step is idempotent, so a follow cut short is run again.
func (bk *buckets) follow(ctx context.Context, l bucket.Layout, ch store.Change, committed store.Promotion, landed bool) error {
	if !landed {
		return bk.undo(ctx, l, ch, committed)
	}
	for _, b := range others(ch, l.K) {
		if err := bk.writeBucket(ctx, l, b, ch); err != nil {
			return &UnavailableError{Dependency: shardName(l.Shards[b]), Msg: fmt.Sprintf("bucket %d did not take it (%v)", b, err)}
		}
	}
	return nil
}

// undo takes ch off the buckets other than 0, which may hold it when bucket 0
// does not: a create's buckets at its version are deleted, a patch's are taken
// back to the committed row (lua.PatchFrom: only a bucket at the change's version
// moves). A stop or a delete reaches them only after bucket 0: nothing to undo.
func (bk *buckets) undo(ctx context.Context, l bucket.Layout, ch store.Change, committed store.Promotion) error {
	if ch.Op != store.OpCreate && ch.Op != store.OpPatch {
		return nil
	}
	for _, b := range others(ch, l.K) {
		shard, c := l.Shards[b], bk.shards.Client(l.Shards[b])
		rctx, cancel := context.WithTimeout(ctx, bk.timeout)
		var reply lua.AdminReply
		var err error
		switch ch.Op {
		case store.OpCreate:
			var h lua.HashState
			var exists bool
			h, exists, err = lua.ReadHash(rctx, c, l.Keys[b])
			if err == nil && exists && h.Ver == ch.Version {
				reply, err = lua.Delete(rctx, c, shard, l.Keys[b], ch.Version, bk.now.now().UnixMilli())
			}
		case store.OpPatch:
			back := store.Change{Op: store.OpPatch, Spec: committed.Spec, State: committed.State, Version: committed.Version}
			reply, err = lua.PatchFrom(rctx, c, shard, l.Keys[b], adminSpec(share(back, b, l.K)), ch.Version, bk.now.now().UnixMilli())
		}
		cancel()
		if err != nil {
			return &UnavailableError{Dependency: shardName(shard), Msg: fmt.Sprintf("bucket %d could not be taken back (%v)", b, err)}
		}
		switch reply.Code {
		case lua.AdminOK, lua.AdminAlreadyApplied, lua.AdminNotFound, lua.AdminStale:
			// back where the row is, gone, or never reached by the change
		default:
			return &UnavailableError{Dependency: shardName(shard), Msg: fmt.Sprintf("bucket %d could not be taken back (it answered %s)", b, reply.Code)}
		}
		bk.announce.announce(ctx, c, reply.Changes)
	}
	return nil
}
