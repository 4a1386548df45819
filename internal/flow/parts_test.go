package flow

import (
	"slices"
	"testing"
)

// The parts column's form reads back as written; "" is no parts, both ways; what
// is not a list of non-negative idx is refused.
func TestPartsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, parts := range [][]int{nil, {0}, {7, 12}, {99_999, 0, 3}} {
		s := FormatParts(parts)
		got, err := ParseParts(s)
		if err != nil || !slices.Equal(got, parts) {
			t.Errorf("%v -> %q -> %v, %v", parts, s, got, err)
		}
	}
	if s := FormatParts([]int{3, 17}); s != "3,17" {
		t.Errorf("FormatParts: %q, want 3,17", s)
	}
	if got, err := ParseParts(""); got != nil || err != nil {
		t.Errorf(`ParseParts(""): %v, %v; want none`, got, err)
	}
	for _, bad := range []string{",", "1,", ",1", "1,,2", "-1", "a", "1;2", " 1", "+1", "1.5"} {
		if got, err := ParseParts(bad); err == nil {
			t.Errorf("ParseParts(%q) = %v; want an error", bad, got)
		}
	}
}
