package httpx

import (
	"crypto/sha256"
	"testing"
)

// Tokens are compared by their SHA-256 digests, so every comparison has inputs of
// one length whatever the guess's length: equal, different and different-length
// guesses take the same path, and only the equal one is known.
func TestTokensCompareDigestsOfOneLength(t *testing.T) {
	ts := Tokens{{Token: "checkout-0123456789abcdef", Role: RoleCheckout, Name: "checkout"}}
	known := ts.digests()
	var lengths []int
	real := digestsEqual
	t.Cleanup(func() { digestsEqual = real })
	digestsEqual = func(a, b [sha256.Size]byte) int {
		lengths = append(lengths, len(a), len(b))
		return real(a, b)
	}
	for _, c := range []struct {
		guess string
		known bool
	}{
		{"checkout-0123456789abcdef", true},
		{"checkout-0123456789abcdeX", false},
		{"c", false},
		{"checkout-0123456789abcdef-and-more", false},
		{"", false},
	} {
		lengths = nil
		actor, ok := known.actorOf(c.guess)
		if ok != c.known || (ok && actor != (Actor{Name: "checkout", Role: RoleCheckout})) {
			t.Errorf("guess %q: %+v %v; want known %v", c.guess, actor, ok, c.known)
		}
		if len(lengths) != 2 || lengths[0] != sha256.Size || lengths[1] != sha256.Size {
			t.Errorf("guess %q compared inputs of lengths %v; want two of %d", c.guess, lengths, sha256.Size)
		}
	}
}
