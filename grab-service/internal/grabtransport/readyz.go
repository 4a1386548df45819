package grabtransport

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/flashsale/platform/grab-service/internal/grab"
)

// Readyz adds "fencedShards" (fenced, as grab.Fence.Status lists them) to next's
// /readyz answer: the ops listener's, as the public one names nothing internal. A fence does not make the instance unready: every instance is
// fenced alike, and the other shards still sell.
func Readyz(fenced func() []grab.FencedShard, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || fenced == nil {
			next.ServeHTTP(w, r)
			return
		}
		rec := &bufferedResponse{header: http.Header{}, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		body := rec.body.Bytes()
		var doc map[string]any
		if json.Unmarshal(body, &doc) == nil {
			doc["fencedShards"] = fenced()
			if b, err := json.Marshal(doc); err == nil {
				body = append(b, '\n')
			}
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.code)
		_, _ = w.Write(body)
	})
}

type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) WriteHeader(code int)        { b.code = code }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
