package main

import (
	"io"
	"net/http"
)

// soldOutBody is what the bare handler answers every request: the size and shape
// of grab-service's SOLD_OUT answer.
var soldOutBody = []byte(`{"requestId":"bench","result":"SOLD_OUT","failedItem":0,"message":"answered from the local SOLD_OUT cache"}` + "\n")

// bareHandler is the sold-out phase's baseline: the least a Go HTTP server can do
// for a grab, read the body and write a fixed JSON answer.
func bareHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write(soldOutBody)
	})
}
