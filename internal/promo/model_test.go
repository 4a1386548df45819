package promo

import (
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The contract's patterns (api/openapi.yaml): the byte tables must accept exactly what
// they do.
var (
	promoIDPattern   = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
	requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
)

func TestIDValidatorsMatchTheContractPatterns(t *testing.T) {
	t.Parallel()
	cases := []string{"", "a", "A-9", "a_b", "a.b:c-d", "a b", "é", "a\x00", "a\n", "-", ".", ":", "_",
		strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat("y", 128), strings.Repeat("y", 129)}
	for c := 0; c < 256; c++ {
		cases = append(cases, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"b")
	}
	for _, id := range cases {
		checkIDValidators(t, id)
	}
}

func FuzzIDValidators(f *testing.F) {
	for _, s := range []string{"", "req-1", "P-1", "a.b:c", strings.Repeat("z", 129), "ü", "a\u200bb", "a\u0085", "\ufeffx", "a\u202eb"} {
		f.Add(s)
	}
	f.Fuzz(checkIDValidators)
}

func checkIDValidators(t *testing.T, id string) {
	if got, want := ValidPromoID(id), promoIDPattern.MatchString(id); got != want {
		t.Errorf("ValidPromoID(%q) = %v; the pattern says %v", id, got, want)
	}
	if got, want := ValidRequestID(id), requestIDPattern.MatchString(id); got != want {
		t.Errorf("ValidRequestID(%q) = %v; the pattern says %v", id, got, want)
	}
	if got, want := ValidPin(id), pinAllowed(id); got != want {
		t.Errorf("ValidPin(%q) = %v; want %v", id, got, want)
	}
}

// pinAllowed is the contract's Pin, said rune by rune: 1..128 bytes of valid UTF-8
// with no whitespace, no control character (C0, DEL, C1) and no format character.
func pinAllowed(pin string) bool {
	if len(pin) == 0 || len(pin) > 128 || !utf8.ValidString(pin) {
		return false
	}
	for _, r := range pin {
		if r == utf8.RuneError || unicode.IsSpace(r) || unicode.In(r, unicode.Cc, unicode.Cf) {
			return false
		}
	}
	return true
}

func TestValidPin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pin  string
		want bool
	}{
		{"buyer-1", true}, {"ü-Ω-中", true}, {"a!~", true}, {strings.Repeat("x", 128), true},
		{"", false}, {strings.Repeat("x", 129), false}, {"a b", false}, {"a\tb", false}, {"a\x7f", false},
		{"a\u0080", false}, {"a\u0085", false}, {"a\u009f", false}, // C1 controls
		{"a\u200b", false}, {"a\u202e", false}, {"\ufeffa", false}, {"a\u00ad", false}, {"a\u2060", false}, // Cf
		{"a\u00a0", false}, {"a\u3000", false}, {"a\u2028", false}, // whitespace
		{"a\xff", false}, {"a\ufffd", false}, // invalid UTF-8, the replacement character
	} {
		if got := ValidPin(c.pin); got != c.want {
			t.Errorf("ValidPin(%q) = %v, want %v", c.pin, got, c.want)
		}
	}
}
