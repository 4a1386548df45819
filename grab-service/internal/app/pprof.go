package app

import (
	"net/http"
	"net/http/pprof"
)

// mountPprof serves the runtime profiles under /debug/pprof/ (only with --pprof):
// go tool pprof http://127.0.0.1:8080/debug/pprof/profile?seconds=10
func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}
