package admintransport

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/promo-admin/internal/adminendpoint"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
)

// Routes of the approval queue (docs/CONTRACT.md, "Approval").
const (
	RouteProposals = "GET /v1/proposals"
	RouteProposal  = "GET /v1/proposals/{id}"
	RouteApprove   = "POST /v1/proposals/{id}/approve"
	RouteReject    = "POST /v1/proposals/{id}/reject"
)

// approvalRoutes mounts the queue's routes: merchandisers, viewers and approvers
// read it; only approvers decide.
func approvalRoutes(set adminendpoint.Set, route func(string, http.Handler, ...httpx.Role), opts []kithttp.ServerOption) {
	read := []httpx.Role{httpx.RoleMerchandiser, httpx.RoleViewer, httpx.RoleApprover}
	route(RouteProposals, kithttp.NewServer(set.ProposalsEndpoint, decodeProposals, encodeProposals, opts...), read...)
	route(RouteProposal, kithttp.NewServer(set.ProposalEndpoint, decodeProposal, encodeProposal, opts...), read...)
	route(RouteApprove, kithttp.NewServer(set.ApproveEndpoint, decodeApprove, encodeApproved, opts...), httpx.RoleApprover)
	route(RouteReject, kithttp.NewServer(set.RejectEndpoint, decodeReject, encodeProposal, opts...), httpx.RoleApprover)
}

func decodeProposals(_ context.Context, r *http.Request) (interface{}, error) {
	q := r.URL.Query()
	pq := adminservice.ProposalQuery{Status: q.Get("status"), Cursor: q.Get("cursor"), Limit: store.DefaultProposalPage}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil {
			return nil, httpx.Invalid("limit", "must be an integer from 1 to 100")
		}
		pq.Limit = n
	}
	if q.Has("status") && pq.Status == "" {
		return nil, httpx.Invalid("status", "must be one of PENDING, APPLYING, APPROVED, REJECTED, FAILED")
	}
	if q.Has("cursor") && pq.Cursor == "" {
		return nil, httpx.Invalid("cursor", "must not be empty")
	}
	return adminendpoint.ProposalsRequest{Query: pq}, nil
}

// proposalID reads {id}: a proposal id is a positive integer.
func proposalID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, httpx.Invalid("id", "must be a proposal id: a positive integer")
	}
	return id, nil
}

func decodeProposal(_ context.Context, r *http.Request) (interface{}, error) {
	id, err := proposalID(r)
	if err != nil {
		return nil, err
	}
	return adminendpoint.ProposalRequest{ID: id}, nil
}

// decodeApprove takes no body, or an empty object.
func decodeApprove(_ context.Context, r *http.Request) (interface{}, error) {
	id, err := proposalID(r)
	if err != nil {
		return nil, err
	}
	var b struct{}
	if err := httpx.DecodeJSON(nil, r, &b, true); err != nil {
		return nil, err
	}
	return adminendpoint.ApproveRequest{ID: id}, nil
}

type rejectBody struct {
	Reason *string `json:"reason"`
}

func decodeReject(_ context.Context, r *http.Request) (interface{}, error) {
	id, err := proposalID(r)
	if err != nil {
		return nil, err
	}
	var b rejectBody
	if err := httpx.DecodeJSON(nil, r, &b, false); err != nil {
		return nil, err
	}
	if b.Reason == nil {
		return nil, httpx.Invalid("reason", "is required: say why the proposal is rejected")
	}
	return adminendpoint.RejectRequest{ID: id, Reason: *b.Reason}, nil
}

func encodeProposals(ctx context.Context, w http.ResponseWriter, response interface{}) error {
	if refused(ctx, w, response) {
		return nil
	}
	page := response.(adminendpoint.ProposalsResponse).Page
	if page.Items == nil {
		page.Items = []adminservice.Proposal{}
	}
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}

func encodeProposal(ctx context.Context, w http.ResponseWriter, response interface{}) error {
	if refused(ctx, w, response) {
		return nil
	}
	httpx.WriteJSON(w, http.StatusOK, response.(adminendpoint.ProposalResponse).Proposal)
	return nil
}

func encodeApproved(ctx context.Context, w http.ResponseWriter, response interface{}) error {
	if refused(ctx, w, response) {
		return nil
	}
	httpx.WriteJSON(w, http.StatusOK, response.(adminendpoint.ApproveResponse).Approved)
	return nil
}

// encodeProposed answers a create or patch recorded as a proposal: 202 with it.
func encodeProposed(w http.ResponseWriter, response interface{}) bool {
	r, ok := response.(adminendpoint.PromotionResponse)
	if !ok || r.Proposal == nil || r.Err != nil {
		return false
	}
	httpx.WriteJSON(w, http.StatusAccepted, r.Proposal)
	return true
}

// approvalError maps the approval queue's refusals to the contract's codes; nil
// for any other error.
func approvalError(err error) *httpx.Error {
	for _, m := range []struct {
		target error
		status int
		code   string
	}{
		{adminservice.ErrApprovalOff, http.StatusConflict, "APPROVAL_OFF"},
		{adminservice.ErrSelfApproval, http.StatusForbidden, "SELF_APPROVAL"},
		{adminservice.ErrProposalDecided, http.StatusConflict, "PROPOSAL_DECIDED"},
		{adminservice.ErrProposalApplying, http.StatusConflict, "PROPOSAL_APPLYING"},
		{adminservice.ErrProposalStale, http.StatusConflict, "PROPOSAL_STALE"},
		{adminservice.ErrProposalFailed, http.StatusConflict, "PROPOSAL_FAILED"},
		{adminservice.ErrProposalsFull, http.StatusConflict, "PROPOSALS_FULL"},
	} {
		if errors.Is(err, m.target) {
			return &httpx.Error{Status: m.status, Code: m.code, Message: err.Error()}
		}
	}
	if errors.Is(err, adminservice.ErrProposalNotFound) {
		return httpx.NotFound("no such proposal")
	}
	return nil
}
