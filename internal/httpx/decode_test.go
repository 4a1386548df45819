package httpx

import (
	"errors"
	"strings"
	"testing"
)

type inner struct {
	Limit int `json:"limit"`
}

type outer struct {
	PromoID string  `json:"promoId"`
	Rate    *inner  `json:"rateLimit"`
	List    []inner `json:"list"`
}

func TestDecodeBytes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		body, field, code string
	}{
		{`{"promoId":"A","rateLimit":{"limit":1},"list":[{"limit":2}]}`, "", ""},
		{`{"PROMOID":"A"}`, "PROMOID", "INVALID_REQUEST"},
		{`{"rateLimit":{"Limit":1}}`, "rateLimit.Limit", "INVALID_REQUEST"},
		{`{"list":[{"limit":1},{"LIMIT":2}]}`, "list.LIMIT", "INVALID_REQUEST"},
		{`{"promoId":1}`, "promoId", "INVALID_REQUEST"},
		{`{"other":1}`, "other", "INVALID_REQUEST"},
		{`{"promoId":"A"} x`, "", "INVALID_REQUEST"},
		{`{"promoId":`, "", "INVALID_REQUEST"},
		{``, "", "INVALID_REQUEST"},
		{`null`, "", ""},
	}
	for _, c := range cases {
		var v outer
		err := DecodeBytes([]byte(c.body), &v, false)
		var e *Error
		switch {
		case c.code == "" && err != nil:
			t.Errorf("%s: unexpected %v", c.body, err)
		case c.code != "" && (!errors.As(err, &e) || e.Code != c.code || e.Field != c.field || e.Message == ""):
			t.Errorf("%s: want %s on %q, have %v", c.body, c.code, c.field, err)
		}
	}
}

func FuzzDecodeBytes(f *testing.F) {
	f.Add([]byte(`{"promoId":"A","rateLimit":{"limit":1}}`))
	f.Add([]byte(strings.Repeat("[", 100)))
	f.Fuzz(func(t *testing.T, body []byte) {
		var v outer
		_ = DecodeBytes(body, &v, true) // must not panic
	})
}
