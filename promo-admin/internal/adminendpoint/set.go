// Package adminendpoint turns adminservice.Service into go-kit endpoints, one Set.
// Business refusals and invalid input travel in the response (endpoint.Failer), so
// that they never count as failures for middleware such as circuit breakers; only
// failures of the service's dependencies are endpoint errors.
package adminendpoint

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
)

// Set holds every endpoint of promo-admin.
type Set struct {
	CreateEndpoint  endpoint.Endpoint
	GetEndpoint     endpoint.Endpoint
	ListEndpoint    endpoint.Endpoint
	PatchEndpoint   endpoint.Endpoint
	StopEndpoint    endpoint.Endpoint
	DeleteEndpoint  endpoint.Endpoint
	HistoryEndpoint endpoint.Endpoint
	// The timeline and on-call's switch routes (oncall.go).
	TimelineEndpoint      endpoint.Endpoint
	PutSwitchesEndpoint   endpoint.Endpoint
	SwitchHistoryEndpoint endpoint.Endpoint
	// The approval queue's (approval.go).
	ProposalsEndpoint endpoint.Endpoint
	ProposalEndpoint  endpoint.Endpoint
	ApproveEndpoint   endpoint.Endpoint
	RejectEndpoint    endpoint.Endpoint
}

// New wires the endpoints of svc, sw and appr with their middleware. With
// approval required, create and patch record proposals (ProposeMiddleware).
func New(svc adminservice.Service, sw adminservice.Switches, appr adminservice.Approval, logger *slog.Logger) Set {
	var createEndpoint endpoint.Endpoint
	{
		createEndpoint = MakeCreateEndpoint(svc)
		createEndpoint = ProposeCreateMiddleware(appr)(createEndpoint)
		createEndpoint = LoggingMiddleware(logger.With("method", "Create"), slog.LevelInfo)(createEndpoint)
	}
	var getEndpoint endpoint.Endpoint
	{
		getEndpoint = MakeGetEndpoint(svc)
		getEndpoint = LoggingMiddleware(logger.With("method", "Get"), slog.LevelDebug)(getEndpoint)
	}
	var listEndpoint endpoint.Endpoint
	{
		listEndpoint = MakeListEndpoint(svc)
		listEndpoint = LoggingMiddleware(logger.With("method", "List"), slog.LevelDebug)(listEndpoint)
	}
	var patchEndpoint endpoint.Endpoint
	{
		patchEndpoint = MakePatchEndpoint(svc)
		patchEndpoint = ProposePatchMiddleware(appr)(patchEndpoint)
		patchEndpoint = LoggingMiddleware(logger.With("method", "Patch"), slog.LevelInfo)(patchEndpoint)
	}
	var stopEndpoint endpoint.Endpoint
	{
		stopEndpoint = MakeStopEndpoint(svc)
		stopEndpoint = LoggingMiddleware(logger.With("method", "Stop"), slog.LevelInfo)(stopEndpoint)
	}
	var deleteEndpoint endpoint.Endpoint
	{
		deleteEndpoint = MakeDeleteEndpoint(svc)
		deleteEndpoint = LoggingMiddleware(logger.With("method", "Delete"), slog.LevelInfo)(deleteEndpoint)
	}
	var historyEndpoint endpoint.Endpoint
	{
		historyEndpoint = MakeHistoryEndpoint(svc)
		historyEndpoint = LoggingMiddleware(logger.With("method", "History"), slog.LevelDebug)(historyEndpoint)
	}
	return Set{
		HistoryEndpoint: historyEndpoint,
		CreateEndpoint:  createEndpoint,
		GetEndpoint:     getEndpoint,
		ListEndpoint:    listEndpoint,
		PatchEndpoint:   patchEndpoint,
		StopEndpoint:    stopEndpoint,
		DeleteEndpoint:  deleteEndpoint,
	}.withOnCall(svc, sw, logger).withApproval(appr, logger)
}

// Requests.
type (
	CreateRequest struct{ Spec promo.Spec }
	GetRequest    struct{ ID store.ID }
	ListRequest   struct{ Query adminservice.ListQuery }
	PatchRequest  struct {
		ID    store.ID
		Patch adminservice.Patch
	}
	StopRequest struct {
		ID     store.ID
		Reason string
	}
	DeleteRequest  struct{ ID store.ID }
	HistoryRequest struct{ ID store.ID }
)

// PromotionResponse answers create, get, patch and stop. Proposal, when set, is
// what a create or patch recorded instead, approval being required (202).
type PromotionResponse struct {
	Promotion promo.Promotion
	Proposal  *adminservice.Proposal
	Err       error
}

// Failed implements endpoint.Failer.
func (r PromotionResponse) Failed() error { return r.Err }

// ListResponse answers list.
type ListResponse struct {
	Page adminservice.ListPage
	Err  error
}

// Failed implements endpoint.Failer.
func (r ListResponse) Failed() error { return r.Err }

// DeleteResponse answers delete.
type DeleteResponse struct{ Err error }

// Failed implements endpoint.Failer.
func (r DeleteResponse) Failed() error { return r.Err }

// HistoryResponse answers history.
type HistoryResponse struct {
	History adminservice.History
	Err     error
}

// Failed implements endpoint.Failer.
func (r HistoryResponse) Failed() error { return r.Err }

var (
	_ endpoint.Failer = PromotionResponse{}
	_ endpoint.Failer = ListResponse{}
	_ endpoint.Failer = DeleteResponse{}
)

// split keeps dependency failures as endpoint errors and puts everything else
// (refusals, invalid input) into the response.
func split(err error) (failed, endpointErr error) {
	if err == nil {
		return nil, nil
	}
	var fe *httpx.FieldError
	switch {
	case errors.As(err, &fe), errors.Is(err, adminservice.ErrNotFound), errors.Is(err, adminservice.ErrExists),
		errors.Is(err, adminservice.ErrBusy), errors.Is(err, adminservice.ErrStopped), errors.Is(err, adminservice.ErrBelowGranted),
		errors.Is(err, adminservice.ErrSwitchesChanged), approvalRefusal(err):
		return err, nil
	}
	return nil, err
}

// MakeCreateEndpoint returns the create endpoint of svc.
func MakeCreateEndpoint(svc adminservice.Service) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		req := request.(CreateRequest)
		p, err := svc.Create(ctx, req.Spec)
		failed, err := split(err)
		return PromotionResponse{Promotion: p, Err: failed}, err
	}
}

// MakeGetEndpoint returns the get endpoint of svc.
func MakeGetEndpoint(svc adminservice.Service) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		req := request.(GetRequest)
		p, err := svc.Get(ctx, req.ID)
		failed, err := split(err)
		return PromotionResponse{Promotion: p, Err: failed}, err
	}
}

// MakeHistoryEndpoint returns the history endpoint of svc.
func MakeHistoryEndpoint(svc adminservice.Service) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		req := request.(HistoryRequest)
		h, err := svc.History(ctx, req.ID)
		failed, err := split(err)
		return HistoryResponse{History: h, Err: failed}, err
	}
}

// MakeListEndpoint returns the list endpoint of svc.
func MakeListEndpoint(svc adminservice.Service) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		req := request.(ListRequest)
		page, err := svc.List(ctx, req.Query)
		failed, err := split(err)
		return ListResponse{Page: page, Err: failed}, err
	}
}

// MakePatchEndpoint returns the patch endpoint of svc.
func MakePatchEndpoint(svc adminservice.Service) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		req := request.(PatchRequest)
		p, err := svc.Patch(ctx, req.ID, req.Patch)
		failed, err := split(err)
		return PromotionResponse{Promotion: p, Err: failed}, err
	}
}

// MakeStopEndpoint returns the stop endpoint of svc.
func MakeStopEndpoint(svc adminservice.Service) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		req := request.(StopRequest)
		p, err := svc.Stop(ctx, req.ID, req.Reason)
		failed, err := split(err)
		return PromotionResponse{Promotion: p, Err: failed}, err
	}
}

// MakeDeleteEndpoint returns the delete endpoint of svc.
func MakeDeleteEndpoint(svc adminservice.Service) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		req := request.(DeleteRequest)
		failed, err := split(svc.Delete(ctx, req.ID))
		return DeleteResponse{Err: failed}, err
	}
}

// LoggingMiddleware logs each call at level, a refusal at Info and a failure at Error.
func LoggingMiddleware(logger *slog.Logger, level slog.Level) endpoint.Middleware {
	return func(next endpoint.Endpoint) endpoint.Endpoint {
		return func(ctx context.Context, request interface{}) (response interface{}, err error) {
			defer func(begin time.Time) {
				took := time.Since(begin)
				logger := logger.With("requestId", httpx.RequestID(ctx))
				switch {
				case err != nil:
					logger.ErrorContext(ctx, "call failed", "took", took.String(), "err", err)
				case failed(response) != nil:
					logger.InfoContext(ctx, "call refused", "took", took.String(), "refusal", failed(response))
				default:
					logger.Log(ctx, level, "call", "took", took.String())
				}
			}(time.Now())
			return next(ctx, request)
		}
	}
}

func failed(response interface{}) error {
	if f, ok := response.(endpoint.Failer); ok {
		return f.Failed()
	}
	return nil
}
