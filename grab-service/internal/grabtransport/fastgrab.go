package grabtransport

import (
	"encoding/json"
)

// scanGrab reads a grab body in one pass without reflection, but only a plain
// one: exactly the contract's keys, each at most once; strings of printable ASCII
// without escapes; integers without fraction, exponent or leading zero; nothing
// after the object. On anything else it gives up (ok false) and the strict decoder
// takes the body, so it never has to name an error, only to agree with that
// decoder on what it accepts: FuzzGrabScannerAgrees holds it to that.
//
// It allocates twice for a body of one item, the checkout service's usual: the
// body as one string, whose slices the values are, and the values the result's
// pointers point into (plainGrab). A value, its own string and pointer each, was
// thirteen allocations a grab.
func scanGrab(body []byte) (w wireGrab, items []wireItem, ok bool) {
	s := scanner{b: string(body)}
	v := new(plainGrab)
	items = v.items[:0]
	// A key read twice finds its field already set: that gives up too.
	ok = s.object(func(key string) bool {
		switch {
		case key == "requestId" && w.RequestID == nil:
			w.RequestID = s.strInto(&v.requestID)
			return w.RequestID != nil
		case key == "pin" && w.Pin == nil:
			w.Pin = s.strInto(&v.pin)
			return w.Pin != nil
		case key == "ip" && w.IP == nil:
			w.IP = s.strInto(&v.ip)
			return w.IP != nil
		case key == "channel" && w.Channel == nil:
			w.Channel = s.strInto(&v.channel)
			return w.Channel != nil
		case key == "holdSeconds" && w.HoldSeconds == nil:
			n, ok := s.integer()
			v.holdSeconds = n
			w.HoldSeconds = &v.holdSeconds
			return ok
		case key == "items" && w.Items == nil:
			w.Items = []json.RawMessage{} // present; parseGrab counts items, not these
			return s.array(func() bool {
				at := &v.first
				if len(items) > 0 {
					at = new(plainItem)
				}
				it, ok := s.item(at)
				items = append(items, it)
				return ok
			})
		}
		return false
	})
	s.ws()
	return w, items, ok && s.i == len(s.b)
}

// plainGrab holds what a scan read, for the pointers of its wireGrab and of its
// first wireItem to point into, and room for that item: one allocation.
type plainGrab struct {
	requestID, pin, ip, channel string
	holdSeconds                 int64
	first                       plainItem
	items                       [1]wireItem
}

// plainItem holds the values of one item a scan read.
type plainItem struct {
	promoID string
	typ     int
	num     int64
}

// item reads one {"promoId", "type", "num"} object into at.
func (s *scanner) item(at *plainItem) (it wireItem, ok bool) {
	ok = s.object(func(key string) bool {
		switch {
		case key == "promoId" && it.PromoID == nil:
			it.PromoID = s.strInto(&at.promoID)
			return it.PromoID != nil
		case key == "type" && it.Type == nil:
			n, ok := s.integer()
			at.typ = int(n)
			it.Type = &at.typ
			return ok
		case key == "num" && it.Num == nil:
			n, ok := s.integer()
			at.num = n
			it.Num = &at.num
			return ok
		}
		return false
	})
	return it, ok
}

// scanner reads the body as a string: keys and values are slices of it.
type scanner struct {
	b string
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// eat skips whitespace and then c, reporting whether c was there.
func (s *scanner) eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object reads {"key": value, ...}, calling member after each key and its colon
// to read the value.
func (s *scanner) object(member func(key string) bool) bool {
	if !s.eat('{') {
		return false
	}
	if s.eat('}') {
		return true
	}
	for {
		s.ws()
		key, ok := s.str()
		if !ok || !s.eat(':') {
			return false
		}
		s.ws()
		if !member(key) {
			return false
		}
		if s.eat('}') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// array reads [value, ...], calling elem to read each value.
func (s *scanner) array(elem func() bool) bool {
	if !s.eat('[') {
		return false
	}
	if s.eat(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.eat(']') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// str reads a string of printable ASCII with no escapes.
func (s *scanner) str() (string, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", false
		}
	}
	return "", false
}

// strInto reads a string into *at and returns at, or nil if there is none.
func (s *scanner) strInto(at *string) *string {
	v, ok := s.str()
	if !ok {
		return nil
	}
	*at = v
	return at
}

// integer reads -?(0|[1-9][0-9]*) of at most 18 digits, which no int64 overflows;
// a fraction or exponent after it is not a plain integer.
func (s *scanner) integer() (int64, bool) {
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	start := s.i
	var n int64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		n = n*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || digits > 18 || (digits > 1 && s.b[start] == '0') {
		return 0, false
	}
	if s.i < len(s.b) {
		if c := s.b[s.i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}
