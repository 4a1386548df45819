package flow

import "unicode/utf8"

// decodeJSON fills e from b when b is a flow event in the shape producers write it
// (AppendJSON's, keys in any order, whitespace anywhere JSON allows it): each key
// one of Event's or Item's field names exactly, at most once; strings without
// escapes or control characters, in valid UTF-8; integers without fraction or
// exponent. It reports false on anything else, and Decode then leaves b to
// encoding/json, so what an event decodes to does not depend on the path it took
// (FuzzDecodeJSON holds the two to the same result). The flow sink decodes every
// event; reflection was most of that, and an allocation per field. Every string of
// e shares one copy of b.
func decodeJSON(b []byte, e *Event) bool {
	d := decoder{s: string(b)}
	if !d.object(func(key string) bool {
		switch key {
		case "eventId":
			return d.str(&e.EventID)
		case "kind":
			var k string
			if !d.str(&k) {
				return false
			}
			e.Kind = Kind(k)
			return true
		case "requestId":
			return d.str(&e.RequestID)
		case "pin":
			return d.str(&e.Pin)
		case "ip":
			return d.str(&e.IP)
		case "items":
			return d.items(&e.Items)
		case "occurredAt":
			return d.str(&e.OccurredAt)
		case "reason":
			return d.str(&e.Reason)
		case "bodyHash":
			return d.str(&e.BodyHash)
		case "holdUntil":
			return d.int64(&e.HoldUntil)
		case "channel":
			return d.str(&e.Channel)
		}
		return false
	}) {
		return false
	}
	d.space()
	return d.i == len(d.s)
}

// decoder reads the subset of JSON decodeJSON accepts from s, at i.
type decoder struct {
	s string
	i int
}

func (d *decoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next skips whitespace and reports whether the next byte is c, consuming it if so.
func (d *decoder) next(c byte) bool {
	d.space()
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

// object reads {"key": value, ...}, handing each key to member, which reads the
// value; a key seen twice fails (encoding/json keeps the last, and merges objects).
func (d *decoder) object(member func(key string) bool) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	var seen []string
	var seenBuf [9]string
	seen = seenBuf[:0]
	for {
		var key string
		if !d.str(&key) || !d.next(':') {
			return false
		}
		for _, k := range seen {
			if k == key {
				return false
			}
		}
		seen = append(seen, key)
		if !member(key) {
			return false
		}
		if d.next(',') {
			continue
		}
		return d.next('}')
	}
}

// str reads a string without escapes or control characters.
func (d *decoder) str(v *string) bool {
	if !d.next('"') {
		return false
	}
	ascii := true
	for j := d.i; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			s := d.s[d.i:j]
			if !ascii && !utf8.ValidString(s) {
				return false // encoding/json replaces invalid bytes with U+FFFD
			}
			*v, d.i = s, j+1
			return true
		case c == '\\' || c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return false
}

// integer reads an integer of at most digits digits (so that it fits the field on
// every platform): JSON's -?(0|[1-9][0-9]*), with no fraction or exponent.
func (d *decoder) integer(digits int) (int64, bool) {
	d.space()
	neg := d.i < len(d.s) && d.s[d.i] == '-'
	if neg {
		d.i++
	}
	start := d.i
	var n int64
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		n = n*10 + int64(d.s[d.i]-'0')
		d.i++
	}
	switch l := d.i - start; {
	case l == 0 || l > digits || (l > 1 && d.s[start] == '0'):
		return 0, false
	case d.i < len(d.s) && (d.s[d.i] == '.' || d.s[d.i] == 'e' || d.s[d.i] == 'E'):
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

func (d *decoder) int(v *int) bool {
	n, ok := d.integer(9)
	*v = int(n)
	return ok
}

func (d *decoder) int64(v *int64) bool {
	n, ok := d.integer(18)
	*v = n
	return ok
}

// boolean reads true or false.
func (d *decoder) boolean(v *bool) bool {
	d.space()
	for _, lit := range [...]string{"true", "false"} {
		if len(d.s)-d.i >= len(lit) && d.s[d.i:d.i+len(lit)] == lit {
			*v, d.i = lit == "true", d.i+len(lit)
			return true
		}
	}
	return false
}

// array reads [elem, ...], handing each element to elem, which reads it.
func (d *decoder) array(elem func() bool) bool {
	if !d.next('[') {
		return false
	}
	if d.next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if d.next(',') {
			continue
		}
		return d.next(']')
	}
}

// ints reads an array of integers (an empty one is an empty slice, as
// encoding/json makes it).
func (d *decoder) ints(v *[]int) bool {
	out := []int{}
	ok := d.array(func() bool {
		var n int
		if !d.int(&n) {
			return false
		}
		out = append(out, n)
		return true
	})
	*v = out
	return ok
}

// items reads the items array (an empty one is an empty slice, as encoding/json
// makes it).
func (d *decoder) items(v *[]Item) bool {
	items := make([]Item, 0, 3)
	ok := d.array(func() bool {
		var it Item
		if !d.object(func(key string) bool {
			switch key {
			case "promoId":
				return d.str(&it.PromoID)
			case "type":
				return d.int(&it.Type)
			case "num":
				return d.int64(&it.Num)
			case "shard":
				return d.int(&it.Shard)
			case "bucket":
				return d.int(&it.Bucket)
			case "buckets":
				return d.int(&it.Buckets)
			case "noIp":
				return d.boolean(&it.NoIP)
			case "amount":
				return d.int64(&it.Amount)
			case "parts":
				return d.ints(&it.Parts)
			}
			return false
		}) {
			return false
		}
		items = append(items, it)
		return true
	})
	*v = items
	return ok
}
