package httpx

import (
	"net/http"
	"strings"
)

// RouteFallback answers requests that match no route of mux with the contract's
// Error body instead of the mux's plain text ("404 page not found", "Method Not
// Allowed"): 404 NOT_FOUND, or 405 METHOD_NOT_ALLOWED with its Allow header. A
// client that parses every 4xx as the Error object then always finds a code and a
// message. Matched routes, and the mux's redirects, are served as they are.
func RouteFallback(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			if r.RequestURI != "*" && !strings.Contains(pattern, "{") {
				// What the mux would serve, without finding it again: a pattern
				// with no wildcards gives the request no path values, only its
				// Pattern. The mux answers "*" itself, and sets a wildcard's values.
				r.Pattern = pattern
				h.ServeHTTP(w, r)
				return
			}
			mux.ServeHTTP(w, r)
			return
		}
		rec := &headerRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusMethodNotAllowed:
			if allow := rec.header.Get("Allow"); allow != "" {
				w.Header().Set("Allow", allow)
			}
			WriteError(r.Context(), &Error{Status: http.StatusMethodNotAllowed, Code: "METHOD_NOT_ALLOWED",
				Message: r.Method + " is not served on " + r.URL.Path}, w)
		case http.StatusMovedPermanently, http.StatusPermanentRedirect, http.StatusTemporaryRedirect, http.StatusFound:
			mux.ServeHTTP(w, r)
		default:
			WriteError(r.Context(), NotFound("no route "+r.Method+" "+r.URL.Path), w)
		}
	})
}

// headerRecorder keeps the status and headers a handler writes and drops its body.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header { return h.header }
func (h *headerRecorder) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}
func (h *headerRecorder) Write(p []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return len(p), nil
}
