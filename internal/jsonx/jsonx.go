// Package jsonx helps write the JSON of hot paths by appending to a buffer, without
// encoding/json's reflection: a rebuild writes millions of ledger entries, and
// grab-service answers every grab. AppendString, and each writer built on it, is
// held to encoding/json byte for byte by a fuzz test (HTML escaping off, the one
// liberty taken: JSON allows '<', '>' and '&' as they are).
package jsonx

import "unicode/utf8"

// AppendString appends s as a JSON string: quote, backslash and control
// characters escaped, invalid UTF-8 replaced by U+FFFD as encoding/json does.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				b = append(b, '\\', shortEscape[c])
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029': // as encoding/json: safe inside JavaScript too
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// shortEscape is encoding/json's two-character escape of the control characters
// that have one.
var shortEscape = [0x20]byte{'\n': 'n', '\r': 'r', '\t': 't', '\b': 'b', '\f': 'f'}
