package adminservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/store"
)

// bucketWriter is what the journal does to the buckets other than 0 (buckets.go).
type bucketWriter interface {
	fitShares(ctx context.Context, l bucket.Layout, total int64) error
	writeBucket(ctx context.Context, l bucket.Layout, b int, ch store.Change) error
	follow(ctx context.Context, l bucket.Layout, ch store.Change, committed store.Promotion, landed bool) error
	undo(ctx context.Context, l bucket.Layout, ch store.Change, committed store.Promotion) error
}

// committer is the journal's step 3 and its question to bucket 0.
type committer interface {
	promote(ctx context.Context, id store.ID, ch store.Change, shard int) (store.Promotion, error)
	landed(ctx context.Context, key string, ch store.Change) (bool, error)
}

// bucketJournal is step 2 of a change of a promotion in k > 1 buckets, bucket 0
// its commit point (buckets.go tells the order).
type bucketJournal struct {
	rows     Journal
	shards   Shards
	buckets  bucketWriter
	commit   committer
	announce *announcer
	timeout  time.Duration // of each Redis call
	now      clock
	log      *slog.Logger
	faults   *faults
}

// settle is journal.settle for a promotion in k > 1 buckets.
func (bj *bucketJournal) settle(ctx context.Context, id store.ID, ch store.Change, k int) (store.Promotion, error) {
	l := layoutOf(id, k)
	committed, last, err := bj.order(ctx, id, ch, l)
	if err != nil {
		return store.Promotion{}, err
	}
	if last {
		if err := bj.writeOthersFirst(ctx, id, ch, l, committed); err != nil {
			return store.Promotion{}, err
		}
	}
	return bj.writeBucket0(ctx, id, ch, l, committed, last)
}

// order tells whether bucket 0 is written last (a change another bucket may
// refuse), with the row as it stands, for an undo of a patch. A patch lowering
// total is refused here if a bucket already granted more than its new share.
func (bj *bucketJournal) order(ctx context.Context, id store.ID, ch store.Change, l bucket.Layout) (committed store.Promotion, last bool, err error) {
	switch ch.Op {
	case store.OpCreate:
		return store.Promotion{}, true, nil
	case store.OpPatch:
		row, err := bj.rows.Row(ctx, id)
		if err != nil {
			return store.Promotion{}, false, &UnavailableError{Dependency: "mysql",
				Msg: "the record could not be read; nothing was changed in Redis, and the repairer will drop the pending change", Err: err}
		}
		committed, last = row, ch.Spec.Total < row.Spec.Total
		if last {
			if err := bj.buckets.fitShares(ctx, l, ch.Spec.Total); err != nil {
				_, err = bj.refuse(ctx, id, ch, err)
				return store.Promotion{}, false, err
			}
		}
	}
	return committed, last, nil
}

// writeOthersFirst writes ch to the buckets other than 0, undoing it on all of
// them if one does not take it.
func (bj *bucketJournal) writeOthersFirst(ctx context.Context, id store.ID, ch store.Change, l bucket.Layout, committed store.Promotion) error {
	for _, b := range others(ch, l.K) {
		err := bj.buckets.writeBucket(ctx, l, b, ch)
		if err == nil {
			continue
		}
		if uerr := bj.buckets.undo(ctx, l, ch, committed); uerr != nil {
			return bj.left(ctx, id, ch, err, uerr)
		}
		var ue *UnavailableError
		if errors.As(err, &ue) {
			err = &UnavailableError{Dependency: ue.Dependency, Msg: ue.Msg + "; the change was undone on every bucket; retry", Err: ue.Err}
		}
		_, err = bj.refuse(ctx, id, ch, err)
		return err
	}
	return nil
}

// writeBucket0 writes ch to bucket 0, the commit point, then brings the other
// buckets to its side (when they were not written first) and promotes ch.
func (bj *bucketJournal) writeBucket0(ctx context.Context, id store.ID, ch store.Change, l bucket.Layout, committed store.Promotion, last bool) (store.Promotion, error) {
	bj.faults.at("between-writes")
	rctx, rcancel := context.WithTimeout(ctx, bj.timeout)
	reply, err := writeHash(rctx, bj.shards.Client(l.Shards[0]), l.Shards[0], l.Keys[0], share(ch, 0, l.K), nil, bj.now.now().UnixMilli())
	rcancel()
	if err != nil {
		return bj.unsure(ctx, id, ch, l, committed, err)
	}
	if refusal := judgeBucket(l, 0, ch, reply); refusal != nil {
		if err := bj.buckets.undo(ctx, l, ch, committed); err != nil {
			return store.Promotion{}, bj.left(ctx, id, ch, refusal, err)
		}
		return bj.refuse(ctx, id, ch, refusal)
	}
	bj.announce.announce(ctx, bj.shards.Client(l.Shards[0]), reply.Changes)
	bj.faults.at("after-redis")
	if !last {
		if err := bj.buckets.follow(ctx, l, ch, committed, true); err != nil {
			return store.Promotion{}, bj.left(ctx, id, ch, err, err)
		}
	}
	return bj.commit.promote(ctx, id, ch, l.Shards[0])
}

// unsure is journal.unsure for a promotion in buckets: bucket 0 says whether ch
// landed, and the other buckets follow before the record does.
func (bj *bucketJournal) unsure(ctx context.Context, id store.ID, ch store.Change, l bucket.Layout, committed store.Promotion, cause error) (store.Promotion, error) {
	landed, err := bj.commit.landed(ctx, id.Key(), ch)
	if err != nil {
		bj.log.WarnContext(ctx, "shard did not answer; change left pending for the repairer",
			"promotion", id.String(), "op", ch.Op, "version", ch.Version, "shard", l.Shards[0], "err", cause, "check", err)
		return store.Promotion{}, &UnavailableError{Dependency: shardName(l.Shards[0]),
			Msg: "did not answer; the change is recorded as pending and will be completed or undone once the shard answers (and is not being rebuilt)", Err: cause}
	}
	if err := bj.buckets.follow(ctx, l, ch, committed, landed); err != nil {
		return store.Promotion{}, bj.left(ctx, id, ch, cause, err)
	}
	if landed {
		return bj.commit.promote(ctx, id, ch, l.Shards[0])
	}
	if err := bj.rows.Discard(ctx, id, ch.Version); err != nil && !errors.Is(err, store.ErrNoPending) {
		return store.Promotion{}, &UnavailableError{Dependency: "mysql", Msg: "undoing a change the shard did not take failed; the repairer will", Err: err}
	}
	return store.Promotion{}, &UnavailableError{Dependency: shardName(l.Shards[0]), Msg: "the change could not be applied and was undone; retry", Err: cause}
}

// refuse discards ch, which no bucket holds any more, and answers why.
func (bj *bucketJournal) refuse(ctx context.Context, id store.ID, ch store.Change, refusal error) (store.Promotion, error) {
	if err := bj.rows.Discard(ctx, id, ch.Version); err != nil && !errors.Is(err, store.ErrNoPending) {
		// No bucket holds the change, so the repairer will discard it too.
		return store.Promotion{}, &UnavailableError{Dependency: "mysql", Msg: "the change was refused (" + refusal.Error() + ") and undoing it in the record failed; the repairer will", Err: err}
	}
	return store.Promotion{}, refusal
}

// left is the answer for a change some bucket could not be brought in line with
// bucket 0 (err, from follow or undo): it stays pending, and the repairer
// completes or undoes it.
func (bj *bucketJournal) left(ctx context.Context, id store.ID, ch store.Change, cause, err error) error {
	bj.log.WarnContext(ctx, "change reached only some buckets; left pending for the repairer",
		"promotion", id.String(), "op", ch.Op, "version", ch.Version, "cause", cause, "err", err)
	var ue *UnavailableError
	if !errors.As(err, &ue) {
		ue = &UnavailableError{Dependency: "redis", Msg: err.Error()}
	}
	return &UnavailableError{Dependency: ue.Dependency, Msg: fmt.Sprintf(
		"the %s reached only some of the promotion's buckets: %s; it is recorded as pending and will be completed or undone once every bucket's shard answers",
		strings.ToLower(string(ch.Op)), ue.Msg), Err: cause}
}
