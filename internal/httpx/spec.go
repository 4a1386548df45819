package httpx

import (
	"net/http"
	"strconv"

	"github.com/flashsale/platform/api"
)

// SpecPath is where both services serve their HTTP contract.
const SpecPath = "/openapi.yaml"

// ServeSpec mounts GET /openapi.yaml on mux: api/openapi.yaml as the binary was
// built with it, no token needed. grab-service and promo-admin, whose contract it is,
// each mount it where their routes are (grabtransport.Handler,
// admintransport.NewHTTPHandler).
func ServeSpec(mux *http.ServeMux) {
	length := strconv.Itoa(len(api.OpenAPI))
	mux.HandleFunc("GET "+SpecPath, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", api.ContentType)
		h.Set("Content-Length", length)
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(api.OpenAPI)
	})
}
