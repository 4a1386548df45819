package promo

import (
	"regexp"
	"strings"
	"testing"
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
	for _, s := range []string{"", "req-1", "P-1", "a.b:c", strings.Repeat("z", 129), "ü"} {
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
}
