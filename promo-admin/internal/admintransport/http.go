// Package admintransport serves promo-admin's endpoints over HTTP/JSON as
// api/openapi.yaml specifies: routes, roles, strict decoding and the one error encoder.
package admintransport

import (
	"net/http"

	kithttp "github.com/go-kit/kit/transport/http"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/promo-admin/internal/adminendpoint"
)

// Routes of promo-admin, also the route label of the metrics.
const (
	RouteCreate  = "POST /v1/promotions"
	RouteList    = "GET /v1/promotions"
	RouteGet     = "GET /v1/promotions/{promoId}/{type}"
	RoutePatch   = "PATCH /v1/promotions/{promoId}/{type}"
	RouteDelete  = "DELETE /v1/promotions/{promoId}/{type}"
	RouteStop    = "POST /v1/promotions/{promoId}/{type}/stop"
	RouteHistory = "GET /v1/promotions/{promoId}/{type}/history"
	// RouteSwitches is in switches.go; the timeline's and on-call's in oncall.go;
	// the approval queue's in approval.go; who a token is in whoami.go.
)

// Options are what the handler needs besides the endpoints.
type Options struct {
	Tokens  httpx.Tokens
	Metrics *httpx.RouteMetrics
	// Checks are the dependencies /readyz reports on, by name.
	Checks map[string]httpx.Check
	// Switches is the switches snapshot GET /v1/switches shows (nil: the defaults),
	// read from SwitchesSource.
	Switches       *configcenter.Holder
	SwitchesSource string
	// Console, when set, serves the merchandiser console's pages under /console/;
	// the pages need no token, the API calls they make do. GET / then redirects
	// there, for a merchandiser who types only the host name.
	Console http.Handler
}

// ConsolePath is where the console is served and GET / redirects to.
const ConsolePath = "/console/"

// NewHTTPHandler mounts every route, /healthz, /readyz and the contract at
// /openapi.yaml (/metrics is the ops listener's: OpsHandler). Every response carries X-Request-Id; every error body is the
// contract's Error.
func NewHTTPHandler(set adminendpoint.Set, o Options) http.Handler {
	mux := http.NewServeMux()
	opts := []kithttp.ServerOption{kithttp.ServerErrorEncoder(encodeError)}
	write := []httpx.Role{httpx.RoleMerchandiser}
	// An approver reads what a decision needs: the promotions, their history and
	// their sale (docs/CONTRACT.md, "Approval"); it writes none of them.
	read := []httpx.Role{httpx.RoleMerchandiser, httpx.RoleViewer, httpx.RoleApprover}
	switchesRead := []httpx.Role{httpx.RoleMerchandiser, httpx.RoleViewer, RoleOnCall}
	route := func(pattern string, h http.Handler, roles ...httpx.Role) {
		mux.Handle(pattern, o.Metrics.Wrap(pattern, o.Tokens.Require(h, roles...)))
	}
	route(RouteCreate, kithttp.NewServer(set.CreateEndpoint, decodeCreate, encodeCreated, opts...), write...)
	route(RouteList, kithttp.NewServer(set.ListEndpoint, decodeList, encodeList, opts...), read...)
	route(RouteGet, kithttp.NewServer(set.GetEndpoint, decodeGet, encodePromotion, opts...), read...)
	route(RoutePatch, kithttp.NewServer(set.PatchEndpoint, decodePatch, encodePromotion, opts...), write...)
	route(RouteDelete, kithttp.NewServer(set.DeleteEndpoint, decodeDelete, encodeDeleted, opts...), write...)
	route(RouteStop, kithttp.NewServer(set.StopEndpoint, decodeStop, encodePromotion, opts...), write...)
	route(RouteHistory, kithttp.NewServer(set.HistoryEndpoint, decodeHistory, encodeHistory, opts...), read...)
	route(RouteTimeline, kithttp.NewServer(set.TimelineEndpoint, decodeTimeline, encodeTimeline, opts...), read...)
	route(RouteSwitches, switchesHandler(o.Switches, o.SwitchesSource), switchesRead...)
	route(RoutePutSwitches, kithttp.NewServer(set.PutSwitchesEndpoint, decodePutSwitches, encodePutSwitches, opts...), RoleOnCall)
	route(RouteSwitchHistory, kithttp.NewServer(set.SwitchHistoryEndpoint, decodeSwitchHistory, encodeSwitchHistory, opts...), switchesRead...)
	approvalRoutes(set, route, opts)
	route(RouteWhoAmI, whoAmIHandler(), httpx.RoleMerchandiser, httpx.RoleViewer, RoleOnCall, httpx.RoleApprover)
	if o.Console != nil {
		mux.Handle("GET "+ConsolePath, o.Console)
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, ConsolePath, http.StatusFound) // 302, as the contract says
		})
	}
	httpx.PublicProbes(mux, o.Checks) // status only; the details are the ops listener's
	httpx.ServeSpec(mux)
	return httpx.RouteFallback(mux) // the server's httpx.Serve gives each request its id
}

// OpsHandler is the ops listener's handler: /metrics of reg and the probes of checks.
func OpsHandler(reg *prometheus.Registry, checks map[string]httpx.Check) http.Handler {
	return httpx.OpsHandler(reg, func(mux *http.ServeMux) { httpx.Probes(mux, nil, checks, nil) }, false)
}
