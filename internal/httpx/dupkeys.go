package httpx

import (
	"bytes"
	"encoding/json"
)

// duplicateKeys refuses an object that names a key twice, at any depth. encoding/json
// keeps the last value, so {"requestId":"a","requestId":"b"} would be served as "b"
// while a gateway, a log or a WAF in front of the service reads "a": a request means
// two things at once. The contract's schemas name each property once, so such a body
// is malformed. body must already be valid JSON (DecodeBytes decodes it first).
func duplicateKeys(body []byte) error {
	type frame struct {
		object  bool
		keys    map[string]bool
		path    string
		wantKey bool
		key     string
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*frame
	// valueDone marks the value of the innermost object's current key as read.
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or an error the typed decode has already reported
		}
		var top *frame
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				path := ""
				if top != nil {
					path = top.path
					if top.object {
						path = join(top.path, top.key)
					}
				}
				stack = append(stack, &frame{object: t == '{', keys: map[string]bool{}, path: path, wantKey: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if top != nil && top.object && top.wantKey {
				if top.keys[t] {
					return Invalid(join(top.path, t), "duplicate key: each field may appear once")
				}
				top.keys[t] = true
				top.key, top.wantKey = t, false
				continue
			}
			valueDone()
		default:
			valueDone()
		}
	}
}
