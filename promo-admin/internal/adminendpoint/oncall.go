package adminendpoint

import (
	"context"
	"log/slog"

	"github.com/go-kit/kit/endpoint"

	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
)

// The timeline and on-call's switch routes: their requests, responses and endpoints.

// Requests.
type (
	TimelineRequest      struct{ ID store.ID }
	PutSwitchesRequest   struct{ Change adminservice.SwitchesChange }
	SwitchHistoryRequest struct {
		Query adminservice.SwitchHistoryQuery
	}
)

// TimelineResponse answers timeline.
type TimelineResponse struct {
	Timeline adminservice.Timeline
	Err      error
}

// Failed implements endpoint.Failer.
func (r TimelineResponse) Failed() error { return r.Err }

// PutSwitchesResponse answers a change of the switches.
type PutSwitchesResponse struct {
	Result adminservice.SwitchesResult
	Err    error
}

// Failed implements endpoint.Failer.
func (r PutSwitchesResponse) Failed() error { return r.Err }

// SwitchHistoryResponse answers the switch history.
type SwitchHistoryResponse struct {
	Page store.SwitchPage
	Err  error
}

// Failed implements endpoint.Failer.
func (r SwitchHistoryResponse) Failed() error { return r.Err }

// withOnCall adds the timeline's and on-call's endpoints of svc and sw to s.
func (s Set) withOnCall(svc adminservice.Service, sw adminservice.Switches, logger *slog.Logger) Set {
	s.TimelineEndpoint = LoggingMiddleware(logger.With("method", "Timeline"), slog.LevelDebug)(MakeTimelineEndpoint(svc))
	s.PutSwitchesEndpoint = LoggingMiddleware(logger.With("method", "PutSwitches"), slog.LevelInfo)(MakePutSwitchesEndpoint(sw))
	s.SwitchHistoryEndpoint = LoggingMiddleware(logger.With("method", "SwitchHistory"), slog.LevelDebug)(MakeSwitchHistoryEndpoint(sw))
	return s
}

// MakeTimelineEndpoint returns the timeline endpoint of svc.
func MakeTimelineEndpoint(svc adminservice.Service) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		req := request.(TimelineRequest)
		tl, err := svc.Timeline(ctx, req.ID)
		failed, err := split(err)
		return TimelineResponse{Timeline: tl, Err: failed}, err
	}
}

// MakePutSwitchesEndpoint returns the endpoint that changes the switches.
func MakePutSwitchesEndpoint(sw adminservice.Switches) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		req := request.(PutSwitchesRequest)
		r, err := sw.PutSwitches(ctx, req.Change)
		failed, err := split(err)
		return PutSwitchesResponse{Result: r, Err: failed}, err
	}
}

// MakeSwitchHistoryEndpoint returns the switch history endpoint.
func MakeSwitchHistoryEndpoint(sw adminservice.Switches) endpoint.Endpoint {
	return func(ctx context.Context, request interface{}) (interface{}, error) {
		req := request.(SwitchHistoryRequest)
		page, err := sw.SwitchHistory(ctx, req.Query)
		failed, err := split(err)
		return SwitchHistoryResponse{Page: page, Err: failed}, err
	}
}
