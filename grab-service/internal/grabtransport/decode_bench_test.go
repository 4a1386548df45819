package grabtransport

import "testing"

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
