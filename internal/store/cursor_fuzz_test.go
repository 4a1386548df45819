package store

import (
	"testing"

	"github.com/flashsale/platform/internal/promo"
)

// A list cursor comes back from a client as it pleases: whatever it is, the decoder
// answers without panicking, an accepted one names a position a promotion can
// have, and a cursor the list writes reads back as itself.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(cursor{CreatedMs: 1700000000000, PromoID: "P-1", Type: 1}.encode())
	f.Add("eyJjIjotMSwicCI6IngiLCJ0IjoxfQ")
	f.Add("not base64!")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeCursor(s)
		if err != nil {
			if ValidCursor(s) {
				t.Fatalf("ValidCursor and decodeCursor disagree on %q", s)
			}
			return
		}
		if c.CreatedMs < 0 || !promo.ValidPromoID(c.PromoID) || !promo.ValidType(c.Type) {
			t.Fatalf("accepted a position no promotion has: %q -> %+v", s, c)
		}
		again, err := decodeCursor(c.encode())
		if err != nil || again != c {
			t.Fatalf("a cursor the list writes does not read back: %+v -> %+v (%v)", c, again, err)
		}
	})
}
