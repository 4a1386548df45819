package flow

import (
	"fmt"
	"strconv"
	"strings"
)

// An envelope pool's item names the parts it took or gave back (Item.Parts) by
// idx. grab_flow keeps them in one text column, parts: the idx comma-separated in
// the order taken ("3,17"), "" for none. FormatParts writes that form and
// ParseParts reads it; the sink, the rebuild and the checker all go through them.

// FormatParts is parts as grab_flow.parts keeps them; "" for none.
func FormatParts(parts []int) string {
	b := make([]byte, 0, 8*len(parts))
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(p), 10)
	}
	return string(b)
}

// ParseParts reads FormatParts' form back: nil for "", an error for anything but
// non-negative integers separated by single commas.
func ParseParts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	out := make([]int, 0, strings.Count(s, ",")+1)
	for f := range strings.SplitSeq(s, ",") {
		p, err := strconv.Atoi(f)
		if err != nil || p < 0 || strings.HasPrefix(f, "+") {
			return nil, fmt.Errorf("envelope parts %q: want comma-separated part indexes", s)
		}
		out = append(out, p)
	}
	return out, nil
}
