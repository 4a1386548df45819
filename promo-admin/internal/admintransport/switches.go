package admintransport

import (
	"net/http"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/httpx"
)

// RouteSwitches shows on-call the switches document this instance has in force.
// It only reads an in-memory snapshot: there is no business logic to put behind
// an endpoint, so it is a plain handler behind the same roles and metrics.
const RouteSwitches = "GET /v1/switches"

// SwitchesView is the body of GET /v1/switches.
type SwitchesView struct {
	// MD5 of the document as published, as in the config metrics and logs;
	// "default" while no document has been applied yet.
	MD5 string `json:"md5"`
	// Source names where the document is read from (a file path, a Nacos key);
	// absent when this instance follows none and serves the defaults.
	Source string `json:"source,omitempty"`
	// Switches is the document as applied: fields it left out hold their defaults.
	Switches configcenter.Switches `json:"switches"`
}

// switchesHandler answers the snapshot h holds; a nil h serves the defaults.
func switchesHandler(h *configcenter.Holder, source string) http.Handler {
	if h == nil {
		h = configcenter.NewHolder()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := h.Load()
		sw := s.Switches.WithLists()
		w.Header().Set("Cache-Control", "no-store")
		httpx.WriteJSON(w, http.StatusOK, SwitchesView{MD5: s.MD5, Source: source, Switches: sw})
	})
}
