package adminendpoint

import (
	"context"
	"errors"
	"log/slog"

	"github.com/go-kit/kit/endpoint"

	"github.com/flashsale/platform/promo-admin/internal/adminservice"
)

// Requests of the approval queue.
type (
	ProposalsRequest struct{ Query adminservice.ProposalQuery }
	ProposalRequest  struct{ ID int64 }
	ApproveRequest   struct{ ID int64 }
	RejectRequest    struct {
		ID     int64
		Reason string
	}
)

// ProposalResponse answers get and reject of a proposal.
type ProposalResponse struct {
	Proposal adminservice.Proposal
	Err      error
}

// Failed implements endpoint.Failer.
func (r ProposalResponse) Failed() error { return r.Err }

// ProposalsResponse answers the queue's list.
type ProposalsResponse struct {
	Page adminservice.ProposalPage
	Err  error
}

// Failed implements endpoint.Failer.
func (r ProposalsResponse) Failed() error { return r.Err }

// ApproveResponse answers an approval.
type ApproveResponse struct {
	Approved adminservice.Approved
	Err      error
}

// Failed implements endpoint.Failer.
func (r ApproveResponse) Failed() error { return r.Err }

// approvalRefusal tells the approval queue's refusals, which travel in the response.
func approvalRefusal(err error) bool {
	for _, target := range []error{adminservice.ErrApprovalOff, adminservice.ErrProposalNotFound, adminservice.ErrSelfApproval,
		adminservice.ErrProposalDecided, adminservice.ErrProposalApplying, adminservice.ErrProposalStale,
		adminservice.ErrProposalFailed, adminservice.ErrProposalsFull} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// withApproval adds the approval queue's endpoints of appr to s.
func (s Set) withApproval(appr adminservice.Approval, logger *slog.Logger) Set {
	s.ProposalsEndpoint = LoggingMiddleware(logger.With("method", "Proposals"), slog.LevelDebug)(MakeProposalsEndpoint(appr))
	s.ProposalEndpoint = LoggingMiddleware(logger.With("method", "Proposal"), slog.LevelDebug)(MakeProposalEndpoint(appr))
	s.ApproveEndpoint = LoggingMiddleware(logger.With("method", "Approve"), slog.LevelInfo)(MakeApproveEndpoint(appr))
	s.RejectEndpoint = LoggingMiddleware(logger.With("method", "Reject"), slog.LevelInfo)(MakeRejectEndpoint(appr))
	return s
}

// ProposeCreateMiddleware records a create as a proposal when approval is
// required; otherwise the create endpoint runs as it is.
func ProposeCreateMiddleware(appr adminservice.Approval) endpoint.Middleware {
	return func(next endpoint.Endpoint) endpoint.Endpoint {
		return func(ctx context.Context, request interface{}) (interface{}, error) {
			if !appr.Required() {
				return next(ctx, request)
			}
			p, err := appr.ProposeCreate(ctx, request.(CreateRequest).Spec)
			failed, err := split(err)
			if failed != nil || err != nil {
				return PromotionResponse{Err: failed}, err
			}
			return PromotionResponse{Proposal: &p}, nil
		}
	}
}

// ProposePatchMiddleware records a patch as a proposal when approval is required
// and the patch changes what approval guards; one that changes nothing of it
// answers the promotion unchanged, writing nothing. Off, the patch applies at once.
func ProposePatchMiddleware(appr adminservice.Approval) endpoint.Middleware {
	return func(next endpoint.Endpoint) endpoint.Endpoint {
		return func(ctx context.Context, request interface{}) (interface{}, error) {
			if !appr.Required() {
				return next(ctx, request)
			}
			req := request.(PatchRequest)
			out, err := appr.ProposePatch(ctx, req.ID, req.Patch)
			failed, err := split(err)
			switch {
			case failed != nil || err != nil:
				return PromotionResponse{Err: failed}, err
			case out.Unchanged != nil:
				return PromotionResponse{Promotion: *out.Unchanged}, nil
			}
			return PromotionResponse{Proposal: out.Proposal}, nil
		}
	}
}

// MakeProposalsEndpoint returns the queue's list endpoint of appr.
func MakeProposalsEndpoint(appr adminservice.Approval) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		page, err := appr.Proposals(ctx, request.(ProposalsRequest).Query)
		failed, err := split(err)
		return ProposalsResponse{Page: page, Err: failed}, err
	}
}

// MakeProposalEndpoint returns the endpoint reading one proposal of appr.
func MakeProposalEndpoint(appr adminservice.Approval) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		p, err := appr.Proposal(ctx, request.(ProposalRequest).ID)
		failed, err := split(err)
		return ProposalResponse{Proposal: p, Err: failed}, err
	}
}

// MakeApproveEndpoint returns the approve endpoint of appr.
func MakeApproveEndpoint(appr adminservice.Approval) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		a, err := appr.Approve(ctx, request.(ApproveRequest).ID)
		failed, err := split(err)
		return ApproveResponse{Approved: a, Err: failed}, err
	}
}

// MakeRejectEndpoint returns the reject endpoint of appr.
func MakeRejectEndpoint(appr adminservice.Approval) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		req := request.(RejectRequest)
		p, err := appr.Reject(ctx, req.ID, req.Reason)
		failed, err := split(err)
		return ProposalResponse{Proposal: p, Err: failed}, err
	}
}
