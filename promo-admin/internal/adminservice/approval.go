package adminservice

// Approval before a sale goes live (docs/CONTRACT.md, "Approval"): with it on, a
// merchandiser's create, and a patch of total, limits, window or channels, is
// validated and planned as today and then recorded as a proposal in MySQL only;
// an approver who is not the proposer applies it through the same journal
// (approve.go), or rejects it. Stop and delete stay immediate.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/svc"
)

// Refusals of the approval queue; the transport maps each to its status and code.
var (
	ErrApprovalOff      = errors.New("approval is off on this promo-admin (--require-approval): changes apply at once and there are no proposals")
	ErrProposalNotFound = errors.New("no such proposal")
	ErrSelfApproval     = errors.New("a proposal is approved by an approver other than its proposer")
	ErrProposalDecided  = errors.New("the proposal is decided already")
	// ErrProposalApplying is a proposal another approval is applying (or left
	// applying: its promotion's history says whether the change landed).
	ErrProposalApplying = errors.New("the proposal is being applied by another approval")
	// ErrProposalStale is an approval that found the promotion moved past the
	// proposal's baseVersion (or, for a create, the key taken): the proposal is FAILED.
	ErrProposalStale = errors.New("the promotion changed since the proposal was made")
	// ErrProposalFailed is an approval whose change the record or the shard refused
	// (an end already past, a total below what is granted): the proposal is FAILED.
	ErrProposalFailed = errors.New("the proposal's change was refused when applied")
	ErrProposalsFull  = errors.New("the approval queue is full")
)

// Proposal is a recorded proposal as the API shows it: Change is the validated
// request (a create's whole spec, a patch's fields).
type Proposal struct {
	ID          int64           `json:"id"`
	PromoID     string          `json:"promoId"`
	Type        int             `json:"type"`
	Kind        string          `json:"kind"`
	BaseVersion int64           `json:"baseVersion"`
	Change      json.RawMessage `json:"change"`
	Proposer    store.Actor     `json:"proposer"`
	ProposedAt  time.Time       `json:"proposedAt"`
	Status      string          `json:"status"`
	DecidedBy   *store.Actor    `json:"decidedBy,omitempty"`
	DecidedAt   *time.Time      `json:"decidedAt,omitempty"`
	Reason      string          `json:"reason,omitempty"`
}

func proposalView(p store.Proposal) Proposal {
	change := json.RawMessage(p.Body)
	if !json.Valid(change) {
		change = json.RawMessage("{}")
	}
	return Proposal{ID: p.ID, PromoID: p.PromoID, Type: p.Type, Kind: p.Kind, BaseVersion: p.BaseVersion, Change: change,
		Proposer: p.Proposer, ProposedAt: p.ProposedAt, Status: p.Status, DecidedBy: p.DecidedBy, DecidedAt: p.DecidedAt, Reason: p.Reason}
}

// ProposalQuery asks for a page of the queue, newest first.
type ProposalQuery struct {
	Status string // one of store's proposal statuses, or "" for all
	Cursor string
	Limit  int // 1..store.MaxProposalPage
}

// ProposalPage is one page; NextCursor is empty on the last.
type ProposalPage struct {
	Items      []Proposal `json:"items"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// PatchOutcome is what a PATCH became with approval on: a Proposal, or, when it
// changes nothing approval guards, the promotion as it stands (Unchanged): nothing
// is written then, so the version, and every pending proposal made against it,
// stay as they are. Every field a patch can change is guarded (sameGuarded), so
// there is no unguarded part to apply at once.
type PatchOutcome struct {
	Proposal  *Proposal
	Unchanged *promo.Promotion
}

// Approved answers an approval: the proposal, APPROVED, and the promotion it made.
type Approved struct {
	Proposal  Proposal        `json:"proposal"`
	Promotion promo.Promotion `json:"promotion"`
}

// MaxRejectReason is the longest reason a rejection takes.
const MaxRejectReason = store.MaxProposalReason

// Approval is the approval queue's side of promo-admin.
type Approval interface {
	// Required says whether creates and patches are proposals (--require-approval).
	Required() bool
	ProposeCreate(ctx context.Context, s promo.Spec) (Proposal, error)
	// ProposePatch records the patch as a proposal, or answers the promotion
	// unchanged when the patch changes nothing approval guards.
	ProposePatch(ctx context.Context, id store.ID, p Patch) (PatchOutcome, error)
	Proposals(ctx context.Context, q ProposalQuery) (ProposalPage, error)
	Proposal(ctx context.Context, id int64) (Proposal, error)
	Approve(ctx context.Context, id int64) (Approved, error)
	Reject(ctx context.Context, id int64, reason string) (Proposal, error)
}

// Queue is the approval queue in the record (store.Proposals).
type Queue interface {
	Propose(ctx context.Context, p store.Proposal, b store.Bounds) (int64, error)
	Get(ctx context.Context, id int64) (store.Proposal, error)
	Page(ctx context.Context, status, cursor string, limit int) (store.ProposalPage, error)
	Reject(ctx context.Context, id int64, who store.Actor, reason string, at time.Time) error
	Claim(ctx context.Context, id int64, who store.Actor) (store.Proposal, error)
	Reclaim(ctx context.Context, id int64, claimedAt time.Time, who store.Actor, olderThan time.Duration) (store.Proposal, error)
	Release(ctx context.Context, id int64, claimedAt time.Time) error
	Holds(ctx context.Context, id int64, claimedAt time.Time) (bool, error)
	Finish(ctx context.Context, id int64, claimedAt time.Time, status, reason string, at time.Time) (store.Proposal, error)
}

// Approvals implements Approval over the queue and the Admin's own handlers.
type Approvals struct {
	required bool
	propose  proposer
	approve  approver
	queue    Queue
	now      clock
}

var _ Approval = (*Approvals)(nil)

// NewApprovals builds the approval side of a; cfg.RequireApproval turns it on.
func NewApprovals(a *Admin, q Queue, cfg Config) *Approvals {
	cfg = cfg.withDefaults()
	now := clock(cfg.Now)
	bounds := store.Bounds{PerPromotion: cfg.ProposalsPerPromotion, Total: cfg.ProposalsTotal}
	return &Approvals{
		required: cfg.RequireApproval,
		propose:  proposer{queue: q, rows: a.create.rows, plans: a.patch, read: a.get, now: now, bounds: bounds},
		approve: approver{queue: q, create: a.create, patch: a.patch, now: now, log: cfg.Logger,
			claimed: claimedJournalOf(a.patch.journal), retryAfter: retryAfter(cfg), timeout: cfg.RepairGrace},
		queue: q,
		now:   now,
	}
}

// Required says whether creates and patches wait for an approver.
func (a *Approvals) Required() bool { return a.required }

// ProposeCreate validates s as a create is validated and records it as a proposal.
func (a *Approvals) ProposeCreate(ctx context.Context, s promo.Spec) (Proposal, error) {
	if !a.required {
		return Proposal{}, ErrApprovalOff
	}
	return a.propose.create(ctx, s)
}

// ProposePatch validates and plans p as a patch is, against the promotion's row,
// and records it as a proposal made against the row's version (PatchOutcome).
func (a *Approvals) ProposePatch(ctx context.Context, id store.ID, p Patch) (PatchOutcome, error) {
	if !a.required {
		return PatchOutcome{}, ErrApprovalOff
	}
	return a.propose.patch(ctx, id, p)
}

// Proposals pages through the queue, newest first.
func (a *Approvals) Proposals(ctx context.Context, q ProposalQuery) (ProposalPage, error) {
	if !a.required {
		return ProposalPage{}, ErrApprovalOff
	}
	if q.Status != "" && !store.ValidProposalStatus(q.Status) {
		return ProposalPage{}, invalid("status", "must be one of PENDING, APPLYING, APPROVED, REJECTED, FAILED")
	}
	if q.Limit < 1 || q.Limit > store.MaxProposalPage {
		return ProposalPage{}, invalid("limit", "must be an integer from 1 to %d", store.MaxProposalPage)
	}
	page, err := a.queue.Page(ctx, q.Status, q.Cursor, q.Limit)
	if errors.Is(err, store.ErrBadCursor) {
		return ProposalPage{}, invalid("cursor", "is not a cursor this service gave out")
	}
	if err != nil {
		return ProposalPage{}, mysqlDown(err)
	}
	out := ProposalPage{Items: make([]Proposal, len(page.Proposals)), NextCursor: page.NextCursor}
	for i, p := range page.Proposals {
		out.Items[i] = proposalView(p)
	}
	return out, nil
}

// Proposal reads one proposal.
func (a *Approvals) Proposal(ctx context.Context, id int64) (Proposal, error) {
	if !a.required {
		return Proposal{}, ErrApprovalOff
	}
	p, err := a.queue.Get(ctx, id)
	if err != nil {
		return Proposal{}, queueError(err)
	}
	return proposalView(p), nil
}

// Reject decides a PENDING proposal REJECTED with the approver's reason; nothing
// of it was applied, nothing is. As an approval, it is another's decision than the
// proposer's (ErrSelfApproval).
func (a *Approvals) Reject(ctx context.Context, id int64, reason string) (Proposal, error) {
	if !a.required {
		return Proposal{}, ErrApprovalOff
	}
	reason = strings.TrimSpace(reason)
	if n := utf8.RuneCountInString(reason); !utf8.ValidString(reason) || n < 1 || n > MaxRejectReason {
		return Proposal{}, invalid("reason", "is required: 1 to %d characters saying why", MaxRejectReason)
	}
	p, err := a.queue.Get(ctx, id)
	if err != nil {
		return Proposal{}, queueError(err)
	}
	who := actorOf(ctx)
	if err := notProposer(who, p); err != nil {
		return Proposal{}, err
	}
	if err := a.queue.Reject(ctx, id, who, reason, a.now.now()); err != nil {
		return Proposal{}, queueError(err)
	}
	return a.Proposal(ctx, id)
}

// Approve applies a PENDING proposal (approve.go).
func (a *Approvals) Approve(ctx context.Context, id int64) (Approved, error) {
	if !a.required {
		return Approved{}, ErrApprovalOff
	}
	return a.approve.handle(ctx, id)
}

// notProposer refuses a decision by the proposal's proposer (ErrSelfApproval),
// names compared as svc normalises them (trimmed, case-folded): the record may hold
// a name from before that, or from a token spelled otherwise.
func notProposer(who store.Actor, p store.Proposal) error {
	if svc.NormalName(who.Name) == svc.NormalName(p.Proposer.Name) {
		return fmt.Errorf("%w: %q proposed it", ErrSelfApproval, p.Proposer.Name)
	}
	return nil
}

// queueError maps the queue's errors to the service's: a refusal is its sentinel
// alone, its message for people, not the record's chain (logged where it fails).
func queueError(err error) error {
	switch {
	case errors.Is(err, store.ErrProposalNotFound):
		return ErrProposalNotFound
	case errors.Is(err, store.ErrProposalDecided):
		return ErrProposalDecided
	case errors.Is(err, store.ErrProposalsFull):
		return ErrProposalsFull
	}
	return mysqlDown(err)
}

// publicCause is why a change was refused, as a person reads it: without the
// record's wrapping ("store: update …: ") nor the sentinel the answer already
// names (under), which tell internals or repeat it.
func publicCause(err, under error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil || !strings.HasPrefix(err.Error(), "store: ") {
			break
		}
		err = u
	}
	msg := err.Error()
	if under != nil {
		msg = strings.TrimPrefix(msg, under.Error()+": ")
	}
	return msg
}
