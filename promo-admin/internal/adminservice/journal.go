package adminservice

// A change reaches the MySQL row and the Redis hash in three steps, the row its own
// journal: propose (the pending change, at version+1), apply (the version-guarded
// admin script), promote. A change stuck between them is resolved by the hash's
// ver, by its request or later by the repairer. Why, and the failure cases:
// docs/design.md, "The promotion row is the journal of its own changes".

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/lua"
)

// journal carries a change through the three steps and repairs the changes their
// requests left pending.
type journal struct {
	rows      Journal
	shards    Shards
	buckets   bucketWriter
	inBuckets *bucketJournal // settle of a promotion in buckets
	announce  *announcer
	timeout   time.Duration // of each Redis call
	grace     time.Duration // a pending change belongs to its request
	every     time.Duration // the repairer's period
	now       clock
	log       *slog.Logger
	faults    *faults
}

// errStale ends a propose that found an abandoned pending change to resolve first.
var errStale = errors.New("an abandoned change is pending")

// propose runs step 1 on a committed, undeleted row. plan reads the row and returns
// the change to make (whole spec and state) or a refusal.
func (j *journal) propose(ctx context.Context, id store.ID, plan func(p *store.Promotion) (*store.Change, error)) (store.Change, error) {
	return j.proposeWith(ctx, id, j.rows.Update, plan)
}

// claimedUpdater is the record's Update under an approval's claim (store.Promotions).
type claimedUpdater interface {
	UpdateClaimed(ctx context.Context, id store.ID, c store.ClaimRef, fn func(p *store.Promotion) error) (store.Promotion, error)
}

// proposeClaimed is propose for an approval holding claim c: the record refuses
// the change (store.ErrClaimMoved) once another approval took the claim over, in
// the change's own transaction, so two approvals never both record it.
func (j *journal) proposeClaimed(ctx context.Context, id store.ID, c store.ClaimRef, plan func(p *store.Promotion) (*store.Change, error)) (store.Change, error) {
	cu, ok := j.rows.(claimedUpdater)
	if !ok {
		return store.Change{}, errors.New("the record cannot hold an approval's claim")
	}
	update := func(ctx context.Context, id store.ID, fn func(p *store.Promotion) error) (store.Promotion, error) {
		return cu.UpdateClaimed(ctx, id, c, fn)
	}
	return j.proposeWith(ctx, id, update, plan)
}

// discard undoes the change of id pending at version, before it reached Redis
// (an approved create recorded under a claim taken over meanwhile).
func (j *journal) discard(ctx context.Context, id store.ID, version int64) error {
	if err := j.rows.Discard(ctx, id, version); err != nil && !errors.Is(err, store.ErrNoPending) {
		return err
	}
	return nil
}

// proposeWith is propose through update (the record's Update, or UpdateClaimed).
func (j *journal) proposeWith(ctx context.Context, id store.ID, update func(context.Context, store.ID, func(p *store.Promotion) error) (store.Promotion, error),
	plan func(p *store.Promotion) (*store.Change, error)) (store.Change, error) {
	for attempt := 0; ; attempt++ {
		var ch store.Change
		var stale *store.Change
		_, err := update(ctx, id, func(p *store.Promotion) error {
			if !p.Committed() || p.State == promo.Deleted {
				return ErrNotFound
			}
			want, err := plan(p)
			if err != nil {
				return err
			}
			if p.Pending != nil {
				if err := j.busy(p.Pending); err != nil {
					return err
				}
				stale = p.Pending
				return errStale
			}
			if err := p.Propose(want.Op, want.Spec, want.State, j.now.now()); err != nil {
				return err
			}
			p.Pending.Actor = actorOf(ctx)
			ch = *p.Pending
			return nil
		})
		var fe *httpx.FieldError
		switch {
		case err == nil:
			return ch, nil
		case stale != nil:
			if err := j.takeOver(ctx, id, stale, attempt); err != nil {
				return store.Change{}, err
			}
			continue
		case errors.Is(err, ErrNotFound), errors.Is(err, store.ErrNotFound):
			return store.Change{}, fmt.Errorf("%s: %w", id, ErrNotFound)
		case errors.As(err, &fe):
			return store.Change{}, fe
		case errors.Is(err, ErrBusy), errors.Is(err, ErrStopped), errors.Is(err, ErrEnvelopeFixed), errors.Is(err, errNoChange),
			errors.Is(err, ErrProposalStale), errors.Is(err, store.ErrClaimMoved):
			return store.Change{}, err
		}
		return store.Change{}, mysqlDown(err)
	}
}

// busy refuses while a pending change still belongs to its request.
func (j *journal) busy(ch *store.Change) error {
	if age := j.now.now().Sub(ch.At); age < j.grace {
		return fmt.Errorf("%w (a %s is pending since %s)", ErrBusy, ch.Op, ch.At.Format(time.RFC3339Nano))
	}
	return nil
}

// takeOver resolves an abandoned pending change before the caller tries again,
// once; a change that is still young, or pending again, is BUSY.
func (j *journal) takeOver(ctx context.Context, id store.ID, pending *store.Change, attempt int) error {
	if err := j.busy(pending); err != nil {
		return err
	}
	if attempt > 0 {
		return fmt.Errorf("%w (a %s is pending)", ErrBusy, pending.Op)
	}
	return j.resolve(ctx, id)
}

// settle runs steps 2 and 3 of a proposed change. It does not stop when the
// caller goes away: a change half done is finished or undone here, not left.
//
// Its time is what is left of the change's grace, counted from the proposal as
// the repairer and a later request count it (busy): a slow proposal (a pool's
// split written row by row) must not write Redis after another request may have
// taken the change over.
func (j *journal) settle(ctx context.Context, id store.ID, ch store.Change) (store.Promotion, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), j.grace-j.now.now().Sub(ch.At))
	defer cancel()
	if k := promo.BucketsOf(ch.Spec.Buckets); k > 1 {
		return j.inBuckets.settle(ctx, id, ch, k)
	}
	key := id.Key()
	shard, c := j.shards.For(key)
	j.faults.at("between-writes")
	parts, err := j.poolParts(ctx, id, ch)
	if err != nil {
		return store.Promotion{}, err
	}
	rctx, rcancel := context.WithTimeout(ctx, j.timeout)
	reply, err := writeHash(rctx, c, shard, key, ch, parts, j.now.now().UnixMilli())
	rcancel()
	if err != nil {
		return j.unsure(ctx, id, ch, shard, err)
	}
	if refusal := judge(ch, reply, shard); refusal != nil {
		if err := j.rows.Discard(ctx, id, ch.Version); err != nil && !errors.Is(err, store.ErrNoPending) {
			// The hash does not hold the change, so the repairer will discard it too.
			return store.Promotion{}, &UnavailableError{Dependency: "mysql", Msg: "the shard refused the change (" + refusal.Error() + ") and undoing it in the record failed; the repairer will", Err: err}
		}
		return store.Promotion{}, refusal
	}
	j.announce.announce(ctx, c, reply.Changes)
	j.faults.at("after-redis")
	return j.promote(ctx, id, ch, shard)
}

// poolParts is what the Redis create of an envelope pool loads: its split read
// back from the record, so that the shard holds exactly the parts MySQL keeps
// (and rebuilds from). nil for any other change.
func (j *journal) poolParts(ctx context.Context, id store.ID, ch store.Change) ([]int64, error) {
	if ch.Op != store.OpCreate || ch.Spec.Envelope == nil {
		return nil, nil
	}
	parts, err := j.rows.EnvelopeParts(ctx, id)
	if err != nil {
		return nil, &UnavailableError{Dependency: "mysql", Msg: "the pool's split could not be read back; nothing was written to Redis, " +
			"and the create stays pending until the repairer drops it", Err: err}
	}
	return parts, nil
}

// promote runs step 3 once the hash holds the change.
func (j *journal) promote(ctx context.Context, id store.ID, ch store.Change, shard int) (store.Promotion, error) {
	p, err := j.rows.Promote(ctx, id, ch.Version, j.now.now())
	if err == nil {
		return p, nil
	}
	if errors.Is(err, store.ErrNoPending) {
		// Resolved meanwhile by the repairer; the row says which way.
		if row, rerr := j.rows.Row(ctx, id); rerr == nil && row.Version >= ch.Version {
			return row, nil
		}
		j.log.ErrorContext(ctx, "a change applied on its shard was discarded from the record while in flight",
			"promotion", id.String(), "op", ch.Op, "version", ch.Version, "shard", shard)
		return store.Promotion{}, &UnavailableError{Dependency: shardName(shard), Msg: "the change was resolved by the repairer while in flight; read the promotion and retry"}
	}
	return store.Promotion{}, &UnavailableError{Dependency: "mysql",
		Msg: fmt.Sprintf("the change is applied on redis shard %d but not yet recorded; the repairer will record it", shard), Err: err}
}

// unsure settles a change whose script call failed: the hash says whether it landed.
func (j *journal) unsure(ctx context.Context, id store.ID, ch store.Change, shard int, cause error) (store.Promotion, error) {
	landed, err := j.landed(ctx, id.Key(), ch)
	if err != nil {
		j.log.WarnContext(ctx, "shard did not answer; change left pending for the repairer",
			"promotion", id.String(), "op", ch.Op, "version", ch.Version, "shard", shard, "err", cause, "check", err)
		return store.Promotion{}, &UnavailableError{Dependency: shardName(shard),
			Msg: "did not answer; the change is recorded as pending and will be completed or undone once the shard answers (and is not being rebuilt)", Err: cause}
	}
	if landed {
		return j.promote(ctx, id, ch, shard)
	}
	if err := j.rows.Discard(ctx, id, ch.Version); err != nil && !errors.Is(err, store.ErrNoPending) {
		return store.Promotion{}, &UnavailableError{Dependency: "mysql", Msg: "undoing a change the shard did not take failed; the repairer will", Err: err}
	}
	return store.Promotion{}, &UnavailableError{Dependency: shardName(shard), Msg: "the change could not be applied and was undone; retry", Err: cause}
}

// errFenced keeps a pending change pending while its shard is rebuilt: the rebuild
// is about to replace the hash with what the record held when it read it, which has
// the change only if it was promoted by then, so the change is resolved against the
// rebuilt hash once the fence is lifted, never against the hash about to go.
var errFenced = errors.New("the shard is being rebuilt (fence marker set)")

// landed reads the hash: does it hold the change? For a promotion in buckets,
// bucket 0's hash (the promotion key) answers for the change.
func (j *journal) landed(ctx context.Context, key string, ch store.Change) (bool, error) {
	shard, c := j.shards.For(key)
	ctx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()
	fenced, err := c.Exists(ctx, promo.FenceKey(shard)).Result()
	if err != nil {
		return false, err
	}
	if fenced > 0 {
		return false, errFenced
	}
	h, exists, err := lua.ReadHash(ctx, c, key)
	if err != nil {
		return false, err
	}
	if ch.Op == store.OpDelete {
		return !exists, nil
	}
	return exists && h.Ver == ch.Version, nil
}

// resolve settles the pending change of id if it is older than RepairGrace:
// promoted if its hash holds it, discarded otherwise.
func (j *journal) resolve(ctx context.Context, id store.ID) error {
	p, err := j.rows.Row(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return mysqlDown(err)
	}
	if p.Pending == nil || j.busy(p.Pending) != nil {
		return nil
	}
	ch := *p.Pending
	shard, _ := j.shards.For(id.Key())
	landed, err := j.landed(ctx, id.Key(), ch)
	if err != nil {
		return &UnavailableError{Dependency: shardName(shard), Msg: "the pending change waits", Err: err}
	}
	if k := promo.BucketsOf(ch.Spec.Buckets); k > 1 {
		// The other buckets follow bucket 0 before the record does.
		if err := j.buckets.follow(ctx, layoutOf(id, k), ch, p, landed); err != nil {
			return err
		}
	}
	outcome := "promoted"
	if landed {
		_, err = j.rows.Promote(ctx, id, ch.Version, j.now.now())
	} else {
		outcome = "discarded"
		err = j.rows.Discard(ctx, id, ch.Version)
	}
	if err != nil && !errors.Is(err, store.ErrNoPending) {
		return mysqlDown(err)
	}
	j.log.InfoContext(ctx, "pending change resolved", "promotion", id.String(), "op", ch.Op,
		"version", ch.Version, "shard", shard, "outcome", outcome)
	return nil
}

// repair resolves every change pending for longer than RepairGrace whose shard
// answers; the others wait for the next run. The error joins what failed.
func (j *journal) repair(ctx context.Context) error {
	ids, err := j.rows.Pending(ctx, j.now.now().Add(-j.grace), 500)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := j.resolve(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("repair %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// run runs repair at once and then every RepairEvery until ctx is done.
func (j *journal) run(ctx context.Context) error {
	return svc.Every(ctx, j.every, func(ctx context.Context) {
		if err := j.repair(ctx); err != nil && ctx.Err() == nil {
			j.log.WarnContext(ctx, "repair left changes pending", "err", err)
		}
	})
}

// writeHash is step 2: the admin script of ch.Op at ch.Version, on shard's client c;
// parts are an envelope pool's split, for its create (poolParts).
func writeHash(ctx context.Context, c redis.Cmdable, shard int, key string, ch store.Change, parts []int64, nowMs int64) (lua.AdminReply, error) {
	switch ch.Op {
	case store.OpCreate:
		s := adminSpec(ch)
		s.Envelope = parts
		code, err := lua.Create(ctx, c, shard, key, s)
		return lua.AdminReply{Code: code}, err
	case store.OpPatch:
		return lua.Patch(ctx, c, shard, key, adminSpec(ch), nowMs)
	case store.OpStop:
		return lua.Stop(ctx, c, shard, key, ch.Version, nowMs)
	case store.OpDelete:
		return lua.Delete(ctx, c, shard, key, ch.Version, nowMs)
	}
	return lua.AdminReply{}, fmt.Errorf("unknown change %q", ch.Op)
}

func adminSpec(ch store.Change) lua.AdminSpec {
	s := ch.Spec
	out := lua.AdminSpec{
		Ver: ch.Version, Total: s.Total, PerPin: s.PerPinLimit, PerIP: s.PerIPLimit,
		MaxPerGrab: s.MaxPerGrab, StartMs: s.StartAt.UnixMilli(), EndMs: s.EndAt.UnixMilli(),
		State: string(ch.State), Buckets: s.Buckets, Channels: s.Channels,
	}
	if s.RateLimit != nil {
		out.RateLimit, out.RateWindowMs = s.RateLimit.Limit, s.RateLimit.WindowSeconds*1000
	}
	return out
}

// judge turns the script's answer into nil (the hash holds the change) or the
// refusal to answer with (the change must be discarded).
func judge(ch store.Change, r lua.AdminReply, shard int) error {
	switch {
	case r.Code == lua.AdminOK:
		return nil
	case r.Code == lua.AdminAlreadyApplied && (ch.Op == store.OpCreate || ch.Op == store.OpPatch):
		return nil
	case r.Code == lua.AdminNotFound && ch.Op == store.OpDelete:
		return nil // already gone: delete.lua did the rest all the same
	case r.Code == lua.AdminExists && ch.Op == store.OpCreate:
		return fmt.Errorf("%w (redis shard %d already holds a hash of this key)", ErrExists, shard)
	case r.Code == lua.AdminStopped:
		return ErrStopped
	case r.Code == lua.AdminBelowGranted:
		return &BelowGrantedError{Total: ch.Spec.Total, Granted: r.Granted}
	case r.Code == lua.AdminFenced:
		return &UnavailableError{Dependency: shardName(shard), Msg: fmt.Sprintf(
			"the shard is being rebuilt from the record (bin/recovery rebuild --shard %d); nothing was changed; retry when it is done", shard)}
	case r.Code == lua.AdminNotFound:
		return &UnavailableError{Dependency: shardName(shard), Msg: fmt.Sprintf(
			"the shard has no hash for this promotion although the record has it; rebuild it (bin/recovery rebuild --shard %d)", shard)}
	}
	return &UnavailableError{Dependency: shardName(shard), Msg: fmt.Sprintf("the shard answered %s to a %s at version %d; nothing was changed", r.Code, ch.Op, ch.Version)}
}

func shardName(shard int) string { return fmt.Sprintf("redis shard %d", shard) }

// actorOf is who makes a change, for its audit row: the request's token.
func actorOf(ctx context.Context) store.Actor {
	a, _ := httpx.ActorFrom(ctx)
	return store.Actor{Name: a.Name, Role: string(a.Role)}
}
