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
	plain := 0 // s[plain:i] needs no escaping: appended in one go
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[plain:i]...)
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				b = append(b, '\\', shortEscape[c])
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			plain = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r != utf8.RuneError || size != 1) && r != '\u2028' && r != '\u2029' {
			i += size
			continue
		}
		b = append(b, s[plain:i]...)
		if r == utf8.RuneError { // as go1.27's encoding/json: the character itself
			b = append(b, "\uFFFD"...)
		} else { // U+2028, U+2029 as encoding/json: safe inside JavaScript too
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		}
		i += size
		plain = i
	}
	b = append(b, s[plain:]...)
	return append(b, '"')
}

// shortEscape is encoding/json's two-character escape of the control characters
// that have one.
var shortEscape = [0x20]byte{'\n': 'n', '\r': 'r', '\t': 't', '\b': 'b', '\f': 'f'}
