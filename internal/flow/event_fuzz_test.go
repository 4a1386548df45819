package flow

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/flashsale/platform/internal/promo"
)

// What the flow sink decodes goes into the system of record (and from there, by a
// rebuild, into Redis ledgers and counters): an accepted event must keep the
// contract's rules, and survive a re-encoding unchanged.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"eventId":"e1","kind":"GRAB","requestId":"r-1","pin":"alice","ip":"10.0.0.1",` +
		`"items":[{"promoId":"A","type":1,"num":2,"shard":14}],"occurredAt":"2026-11-11T12:00:00.000Z","bodyHash":"abc"}`))
	f.Add([]byte(`{"eventId":"e2","kind":"CANCEL","requestId":"r-1","pin":"alice","ip":"10.0.0.1",` +
		`"items":[{"promoId":"A","type":1,"num":2,"shard":14}],"occurredAt":"2026-11-11T12:00:01.000+08:00","reason":"ROLLBACK"}`))
	f.Add([]byte(`{"eventId":"e3","kind":"GRAB","requestId":"r 1","pin":"","ip":"x","items":[{"promoId":"A}","type":0,"num":-1,"shard":99}],"occurredAt":"x"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		if (e.Kind != Grab && e.Kind != Cancel) || e.EventID == "" || len(e.EventID) > 64 || !promo.ValidRequestID(e.RequestID) ||
			!promo.ValidPin(e.Pin) || e.IP == "" || len(e.IP) > 64 || len(e.Items) == 0 {
			t.Fatalf("accepted an event the record cannot hold: %q -> %+v", b, e)
		}
		for _, it := range e.Items {
			if !promo.ValidPromoID(it.PromoID) || !promo.ValidType(it.Type) || it.Num < 1 || it.Num > promo.MaxTotal || it.Shard < 0 || it.Shard > 15 {
				t.Fatalf("accepted an item the record cannot hold: %q -> %+v", b, it)
			}
		}
		again, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := Decode(again)
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("re-encoding changed the event: %+v -> %+v (%v)", e, e2, err)
		}
	})
}
