package grabtransport

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzDecodeGrab: no body makes the decoder panic, and whatever it accepts is valid.
func FuzzDecodeGrab(f *testing.F) {
	f.Add([]byte(`{"requestId":"r1","pin":"p","ip":"10.0.0.1","items":[{"promoId":"A","type":1,"num":1}]}`))
	f.Add([]byte(`{"requestId":"r1","pin":"p","ip":"::1","items":[{"promoId":"A","type":1,"num":1},{"promoId":"B","type":2,"num":3}]}`))
	f.Add([]byte(`{"items":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeGrabBody(body)
		if err != nil {
			return
		}
		if req.RequestID == "" || req.Pin == "" || req.IP == "" || len(req.Items) == 0 || len(req.Items) > MaxItems {
			t.Fatalf("accepted an invalid request: %+v", req)
		}
		for _, it := range req.Items {
			if it.Num < 1 || it.Type < 1 || it.Type > 99 || it.PromoID == "" || strings.ContainsAny(it.PromoID, "{}_: ") {
				t.Fatalf("accepted an invalid item: %+v", it)
			}
		}
	})
}

// FuzzGrabScannerAgrees: whatever body the one-pass scanner takes, the strict
// decoder gives the same request or the same error for it. (Bodies the scanner
// gives up on go to the strict decoder anyway.)
func FuzzGrabScannerAgrees(f *testing.F) {
	for _, b := range []string{
		`{"requestId":"r1","pin":"p","ip":"10.0.0.1","items":[{"promoId":"A","type":1,"num":1}]}`,
		` { "items" : [ { "num" : 3 , "type" : 2 , "promoId" : "B-1" } , {"promoId":"A","type":1,"num":1} ] , "ip" : "::ffff:10.0.0.1" , "pin" : "x" , "requestId" : "a.b:c" } `,
		`{"requestId":"r1","pin":"p","ip":"10.0.0.1","items":[]}`,
		`{"requestId":"r1","pin":"p","ip":"10.0.0.1","items":[{"promoId":"A","type":-0,"num":01}]}`,
		`{"requestId":"r1","requestId":"r2","pin":"p","ip":"10.0.0.1","items":[{"promoId":"A","type":1,"num":1}]}`,
		`{"requestId":"r1","pin":"p","ip":"10.0.0.1","items":[{"promoId":"A","type":1,"num":1e0}]}`,
		`{"requestId":"r1","pin":"p","ip":"10.0.0.1","items":[{"promoId":"A","type":1,"num":99999999999999999999}]}`,
		`{"requestId":"r\u0031","pin":"p","ip":"10.0.0.1","items":[{"promoId":"A","type":1,"num":1},{"promoId":"A","type":1,"num":2}]}`,
		`{"REQUESTID":"r1"}`, `{}`, `{"items":null}`, `[]`, ``, `{"pin":"p"} x`,
		`{"requestId":"r1","pin":"p","ip":"10.0.0.1","holdSeconds":900,"items":[{"promoId":"A","type":1,"num":1}]}`,
		`{"requestId":"r1","pin":"p","ip":"10.0.0.1","items":[{"promoId":"A","type":1,"num":1}],"holdSeconds":-1}`,
		`{"holdSeconds":1,"holdSeconds":2}`, `{"holdSeconds":1.0}`, `{"holdSeconds":"60"}`,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w, items, ok := scanGrab(body)
		if !ok {
			return
		}
		have, herr := parseGrab(w, len(items), func(i int) (wireItem, error) { return items[i], nil })
		want, werr := decodeGrabStrict(body)
		if fmt.Sprint(herr) != fmt.Sprint(werr) || fmt.Sprintf("%+v", have) != fmt.Sprintf("%+v", want) {
			t.Fatalf("body %q\n scanner: %+v, %v\n strict:  %+v, %v", body, have, herr, want, werr)
		}
	})
}
