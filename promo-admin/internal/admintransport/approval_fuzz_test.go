package admintransport

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"

	"github.com/flashsale/platform/promo-admin/internal/adminendpoint"
)

// The approval queue's decoders under fuzzing: whatever the id and the body, a
// request naming a positive proposal id and a reason, or a 4xx contract Error.
func FuzzDecodeReject(f *testing.F) {
	f.Add("1", []byte(`{"reason":"the price is wrong"}`))
	f.Add("0", []byte(`{"reason":"x"}`))
	f.Add("-3", []byte(`{}`))
	f.Add("9223372036854775808", []byte(`{"reason":null}`))
	f.Add("7", []byte(`{"reason":"a","reason":"b"}`))
	f.Add("7", []byte(``))
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		r := httptest.NewRequest("POST", "/v1/proposals/x/reject", bytes.NewReader(body))
		r.SetPathValue("id", id)
		v, err := decodeReject(context.Background(), r)
		if err != nil {
			checkRefusal(t, body, err)
			return
		}
		if req := v.(adminendpoint.RejectRequest); req.ID < 1 {
			t.Fatalf("id %q body %q: accepted proposal id %d", id, body, req.ID)
		}
	})
}

func FuzzDecodeApprove(f *testing.F) {
	f.Add("1", []byte(``))
	f.Add("1", []byte(`{}`))
	f.Add("1", []byte(`{"force":true}`))
	f.Add("abc", []byte(`[]`))
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		r := httptest.NewRequest("POST", "/v1/proposals/x/approve", bytes.NewReader(body))
		r.SetPathValue("id", id)
		v, err := decodeApprove(context.Background(), r)
		if err != nil {
			checkRefusal(t, body, err)
			return
		}
		if req := v.(adminendpoint.ApproveRequest); req.ID < 1 {
			t.Fatalf("id %q: accepted proposal id %d", id, req.ID)
		}
	})
}
