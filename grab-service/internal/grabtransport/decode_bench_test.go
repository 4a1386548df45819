package grabtransport

import (
	"context"
	"net/http"
	"testing"

	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/internal/httpx"
)

// BenchmarkDecodeGrab compares the one-pass scanner with the strict decoder on the
// checkout service's body: go test -bench DecodeGrab -benchmem ./internal/grabtransport
func BenchmarkDecodeGrab(b *testing.B) {
	body := []byte(`{"requestId":"b1a2c3-000123","pin":"p98765","ip":"198.18.0.77","items":[{"promoId":"b1a2c3-hot-0","type":1,"num":1}]}`)
	for _, c := range []struct {
		name   string
		decode func([]byte) error
	}{
		{"scanner", func(b []byte) error { _, err := DecodeGrabBody(b); return err }},
		{"strict", func(b []byte) error { _, err := decodeGrabStrict(b); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.decode(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeSoldOut compares writing a SOLD_OUT answer by Result.AppendJSON
// with encoding/json (httpx.WriteJSON, what encodeResult did before):
// go test -bench EncodeSoldOut -benchmem ./internal/grabtransport
func BenchmarkEncodeSoldOut(b *testing.B) {
	failed := 0
	res := grab.Result{RequestID: "b1a2c3-000123", Result: grab.SoldOut, FailedItem: &failed, Message: "answered from the local SOLD_OUT cache"}
	for _, c := range []struct {
		name   string
		encode func(http.ResponseWriter)
	}{
		{"append", func(w http.ResponseWriter) { _ = encodeGrab(context.Background(), w, res) }},
		{"reflection", func(w http.ResponseWriter) { httpx.WriteJSON(w, http.StatusConflict, res) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := discardWriter{http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				c.encode(w)
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps nothing: the benchmark measures the
// encoding, not a recorder's buffer.
type discardWriter struct{ h http.Header }

func (w discardWriter) Header() http.Header         { return w.h }
func (w discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w discardWriter) WriteHeader(int)             {}
