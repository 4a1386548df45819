package adminservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
)

// approver applies a proposal: claim it (PENDING → APPLYING, one approver wins),
// carry its change through the journal as the command would (never half-applied),
// then finish it APPROVED or FAILED. Refused before anything was recorded, the
// claim is released; an unknown outcome stays APPLYING until a later approval
// finds the promotion shows nothing of it (docs/CONTRACT.md, "Approval").
type approver struct {
	queue      Queue
	create     createHandler
	patch      patchHandler
	claimed    claimedJournal // nil: a journal that cannot hold a claim (then changes apply as any)
	now        clock
	log        *slog.Logger
	retryAfter time.Duration // since a claim, by MySQL's clock, before another approval may retry it
	timeout    time.Duration // of the apply, past the request's end
}

// requestDeadline is svc's bound on a request's handler: a claim is made within it.
const requestDeadline = 10 * time.Second

// retryAfter is how old a claim must be before another approval takes it over: its
// apply (RepairGrace from the claim, started within the request's deadline) can no
// longer record the change, and the settle of one recorded (RepairGrace again, and
// a Redis call) is over; the journal also refuses a change under a claim taken
// over (UpdateClaimed), so this is the margin, not the only guard.
func retryAfter(cfg Config) time.Duration {
	return requestDeadline + 2*cfg.RepairGrace + cfg.RedisTimeout
}

// claimedJournal records an approval's change only under its claim: a patch in
// its own transaction (journal.proposeClaimed), a create undone when the claim
// moved meanwhile (journal.discard).
type claimedJournal interface {
	proposeClaimed(ctx context.Context, id store.ID, c store.ClaimRef, plan func(p *store.Promotion) (*store.Change, error)) (store.Change, error)
	discard(ctx context.Context, id store.ID, version int64) error
}

func claimedJournalOf(c changer) claimedJournal {
	if cj, ok := c.(claimedJournal); ok {
		return cj
	}
	return nil
}

func (h approver) handle(ctx context.Context, id int64) (Approved, error) {
	p, err := h.queue.Get(ctx, id)
	if err != nil {
		return Approved{}, queueError(err)
	}
	who := actorOf(ctx)
	if err := notProposer(who, p); err != nil {
		return Approved{}, err
	}
	claimed, err := h.claim(ctx, p, who)
	if err != nil {
		return Approved{}, err
	}
	// Once claimed, the change is carried to its end whether or not the approver waits.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.timeout)
	defer cancel()
	pr, recorded, err := h.apply(actx, claimed)
	// The apply may have spent its time (a slow settle, a deadline met before the
	// journal recorded): what became of the claim is recorded on time of its own.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer fcancel()
	return h.finish(fctx, claimed, pr, recorded, err)
}

// finishTimeout bounds the step that records an approval's outcome (Finish or
// Release), run after the apply whatever time the apply left.
const finishTimeout = 5 * time.Second

// claim makes who the approver applying p.
func (h approver) claim(ctx context.Context, p store.Proposal, who store.Actor) (store.Proposal, error) {
	switch p.Status {
	case store.ProposalPending:
		c, err := h.queue.Claim(ctx, p.ID, who)
		if errors.Is(err, store.ErrProposalDecided) {
			return store.Proposal{}, fmt.Errorf("%w (another approver claimed it first)", ErrProposalDecided)
		}
		if err != nil {
			return store.Proposal{}, queueError(err)
		}
		h.log.InfoContext(ctx, "proposal claimed", "proposal", p.ID, "by", who.Name, "claimedAt", c.DecidedAt)
		return c, nil
	case store.ProposalApplying:
		return h.retry(ctx, p, who)
	}
	return store.Proposal{}, fmt.Errorf("%w: it is %s", ErrProposalDecided, p.Status)
}

// retry takes over a claim left APPLYING long enough ago, by MySQL's clock, when
// nothing of its change reached the promotion: the record decides both at once
// (store.Proposals.Reclaim).
func (h approver) retry(ctx context.Context, p store.Proposal, who store.Actor) (store.Proposal, error) {
	by, at := p.DecidedBy, p.DecidedAt
	if by == nil || at == nil {
		return store.Proposal{}, fmt.Errorf("%w (its claim is unnamed)", ErrProposalApplying)
	}
	c, err := h.queue.Reclaim(ctx, p.ID, *at, who, h.retryAfter)
	switch {
	case errors.Is(err, store.ErrClaimYoung):
		return store.Proposal{}, fmt.Errorf("%w (claimed by %q)", ErrProposalApplying, by.Name)
	case errors.Is(err, store.ErrClaimTouched):
		return store.Proposal{}, fmt.Errorf("%w: claimed by %q at %s and not finished, and the promotion has changed since; "+
			"its history says whether this change landed", ErrProposalApplying, by.Name, at.Format(time.RFC3339Nano))
	case errors.Is(err, store.ErrProposalDecided):
		return store.Proposal{}, fmt.Errorf("%w (another approval took it over first)", ErrProposalApplying)
	case err != nil:
		return store.Proposal{}, queueError(err)
	}
	h.log.WarnContext(ctx, "proposal left applying retried", "proposal", p.ID, "claimedBy", by.Name, "claimedAt", *at,
		"by", who.Name, "reclaimedAt", c.DecidedAt)
	return c, nil
}

// apply carries p's change through the journal. recorded says whether the
// journal recorded it as pending (after which only the journal undoes it).
func (h approver) apply(ctx context.Context, p store.Proposal) (pr promo.Promotion, recorded bool, err error) {
	id := store.ID{PromoID: p.PromoID, Type: p.Type}
	switch p.Kind {
	case store.ProposeCreate:
		var s promo.Spec
		if err := json.Unmarshal([]byte(p.Body), &s); err != nil {
			return pr, false, fmt.Errorf("the recorded create does not read back: %v", err)
		}
		return h.applyCreate(ctx, id, s, store.ClaimRef{Proposal: p.ID, At: *p.DecidedAt})
	case store.ProposePatch:
		var c patchChange
		if err := json.Unmarshal([]byte(p.Body), &c); err != nil {
			return pr, false, fmt.Errorf("the recorded patch does not read back: %v", err)
		}
		return h.applyPatch(ctx, id, c.patch(), p.BaseVersion, store.ClaimRef{Proposal: p.ID, At: *p.DecidedAt})
	}
	return pr, false, fmt.Errorf("unknown kind %q", p.Kind)
}

func (h approver) applyCreate(ctx context.Context, id store.ID, s promo.Spec, c store.ClaimRef) (promo.Promotion, bool, error) {
	if err := validateSpec(s, h.now.now()); err != nil {
		return promo.Promotion{}, false, err
	}
	row, err := h.create.insert(ctx, id, s)
	if err != nil {
		return promo.Promotion{}, false, err
	}
	if recorded, err := h.stillClaimed(ctx, id, c, row.Pending.Version); err != nil {
		return promo.Promotion{}, recorded, err
	}
	p, err := h.create.journal.settle(ctx, id, *row.Pending)
	if err != nil {
		return promo.Promotion{}, true, err
	}
	return h.create.view.answer(ctx, p), true, nil
}

// stillClaimed checks, right after a create was recorded pending, that the
// approval still holds its claim: the insert cannot check it in its transaction
// as a patch does, but a takeover committed before it found no row (Reclaim locks
// the key) and so moved the claim, which this sees; the create is then undone
// before it reaches Redis (ErrClaimMoved, nothing recorded). recorded says whether
// the create stays pending, for the repairer.
func (h approver) stillClaimed(ctx context.Context, id store.ID, c store.ClaimRef, version int64) (recorded bool, err error) {
	if h.claimed == nil {
		return true, nil
	}
	held, err := h.queue.Holds(ctx, c.Proposal, c.At)
	if err != nil {
		return true, &UnavailableError{Dependency: "mysql", Msg: "whether the approval still holds its claim could not be read; " +
			"the create stays pending until the repairer undoes it", Err: err}
	}
	if held {
		return true, nil
	}
	if err := h.claimed.discard(ctx, id, version); err != nil {
		return true, &UnavailableError{Dependency: "mysql", Msg: "undoing a create whose claim was taken over failed; the repairer will", Err: err}
	}
	return false, fmt.Errorf("proposal %d: %w", c.Proposal, store.ErrClaimMoved)
}

// applyPatch proposes the patch only on the row at base: a promotion that moved
// on since the proposal refuses it (ErrProposalStale); and only while the claim is
// still held, in the same transaction (store.ErrClaimMoved otherwise).
func (h approver) applyPatch(ctx context.Context, id store.ID, patch Patch, base int64, c store.ClaimRef) (promo.Promotion, bool, error) {
	plan := func(p *store.Promotion) (*store.Change, error) {
		if p.Version != base {
			return nil, fmt.Errorf("%w: the promotion is at version %d, the proposal was made at version %d", ErrProposalStale, p.Version, base)
		}
		return h.patch.plan(id, p, patch)
	}
	var ch store.Change
	var err error
	if h.claimed != nil {
		ch, err = h.claimed.proposeClaimed(ctx, id, c, plan)
	} else {
		ch, err = h.patch.journal.propose(ctx, id, plan)
	}
	if err != nil {
		return promo.Promotion{}, false, err
	}
	p, err := h.patch.journal.settle(ctx, id, ch)
	if err != nil {
		return promo.Promotion{}, true, err
	}
	return h.patch.view.answer(ctx, p), true, nil
}

// finish records what became of the claimed proposal p and answers the approval.
func (h approver) finish(ctx context.Context, p store.Proposal, pr promo.Promotion, recorded bool, err error) (Approved, error) {
	claimedAt := *p.DecidedAt
	unsure := errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
	switch {
	case err == nil:
		done, ferr := h.queue.Finish(ctx, p.ID, claimedAt, store.ProposalApproved, "", h.now.now())
		if ferr != nil {
			h.log.ErrorContext(ctx, "proposal applied, not marked APPROVED", "proposal", p.ID, "err", ferr)
			return Approved{}, &UnavailableError{Dependency: "mysql", Msg: "the change is applied, but the proposal could not be marked APPROVED and shows APPLYING", Err: ferr}
		}
		return Approved{Proposal: proposalView(done), Promotion: pr}, nil
	case errors.Is(err, store.ErrClaimMoved):
		// Another approval took the claim over: nothing recorded here; it decides.
		return Approved{}, fmt.Errorf("%w (another approval took it over)", ErrProposalApplying)
	case !recorded && (unsure || errors.Is(err, ErrBusy)):
		if rerr := h.queue.Release(ctx, p.ID, claimedAt); rerr != nil {
			h.log.WarnContext(ctx, "proposal claim not released", "proposal", p.ID, "err", rerr)
		} else {
			h.log.InfoContext(ctx, "proposal released: PENDING again", "proposal", p.ID, "claimedAt", claimedAt, "err", err)
		}
		return Approved{}, err // nothing recorded: PENDING again, to approve later
	case unsure:
		h.log.WarnContext(ctx, "proposal left applying", "proposal", p.ID, "err", err)
		return Approved{}, &UnavailableError{Dependency: "redis", Msg: fmt.Sprintf("proposal %d stays APPLYING: its change is pending "+
			"and will be completed or undone by the journal; the promotion's history says which", p.ID), Err: err}
	}
	verdict := ErrProposalFailed
	if errors.Is(err, ErrProposalStale) || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) {
		verdict = ErrProposalStale
	}
	reason := publicCause(err, ErrProposalStale)
	if _, ferr := h.queue.Finish(ctx, p.ID, claimedAt, store.ProposalFailed, reason, h.now.now()); ferr != nil {
		return Approved{}, mysqlDown(ferr)
	}
	h.log.InfoContext(ctx, "proposal failed", "proposal", p.ID, "err", err)
	return Approved{}, fmt.Errorf("%w; proposal %d is FAILED: %s", verdict, p.ID, reason)
}
