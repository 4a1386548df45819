package flow

import (
	"reflect"
	"testing"

	"github.com/flashsale/platform/internal/promo"
)

// A request index entry is read back from a shard that anyone with write access to
// it could have filled: an accepted entry names only shards, buckets and items the
// grab path can route, and survives its own re-encoding unchanged.
func FuzzDecodeRequestIndex(f *testing.F) {
	f.Add([]byte(`{"h":"ab12","pin":"alice","ip":"10.0.0.1","items":[{"promoId":"A","type":1,"num":2,"shard":14}],"at":1700000000000}`))
	f.Add([]byte(`{"h":"ab12","pin":"alice","ip":"10.0.0.1","items":[{"promoId":"A","type":1,"num":1,"shard":3,"bucket":5,"buckets":8}],"hu":1}`))
	f.Add([]byte(`{"h":"x","pin":"bob","ip":"::1","items":[{"promoId":"P","type":2,"num":2,"shard":0,"amount":30,"parts":[4,9]}]}`))
	f.Add([]byte(`{"h":"x","pin":"bob","ip":"::1","items":[{"promoId":"P","type":2,"num":1,"shard":99,"bucket":40,"buckets":8}]}`))
	f.Add([]byte(`{"h":"x","pin":"b\u202eob","ip":"::1","items":[]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := DecodeRequestIndex(b)
		if err != nil {
			return
		}
		if !promo.ValidPin(x.Pin) || len(x.Items) == 0 || len(x.Items) > promo.MaxItemsPerGrab {
			t.Fatalf("accepted an entry no grab writes: %q -> %+v", b, x)
		}
		for _, it := range x.Items {
			if it.Shard < 0 || it.Shard >= 16 || it.Bucket < 0 || it.Bucket >= max(it.Buckets, 1) || it.Buckets > promo.MaxBuckets ||
				!promo.ValidPromoID(it.PromoID) || !promo.ValidType(it.Type) || it.Num < 1 {
				t.Fatalf("accepted an item the grab path cannot route: %q -> %+v", b, it)
			}
		}
		again, err := DecodeRequestIndex(x.AppendJSON(nil))
		if err != nil || !reflect.DeepEqual(x, again) {
			t.Fatalf("re-encoding changed the entry: %+v -> %+v (%v)", x, again, err)
		}
	})
}

func TestDecodeRequestIndexRefusesForgedEntries(t *testing.T) {
	for name, raw := range map[string]string{
		"shard out of range":  `{"h":"x","pin":"bob","ip":"1.2.3.4","items":[{"promoId":"P","type":2,"num":1,"shard":99}]}`,
		"bucket past buckets": `{"h":"x","pin":"bob","ip":"1.2.3.4","items":[{"promoId":"P","type":2,"num":1,"shard":1,"bucket":9,"buckets":8}]}`,
		"no items":            `{"h":"x","pin":"bob","ip":"1.2.3.4","items":[]}`,
		"bidi pin":            `{"h":"x","pin":"b\u202eob","ip":"1.2.3.4","items":[{"promoId":"P","type":2,"num":1,"shard":1}]}`,
		"unknown field":       `{"h":"x","pin":"bob","ip":"1.2.3.4","items":[{"promoId":"P","type":2,"num":1,"shard":1}],"admin":true}`,
		"trailing data":       `{"h":"x","pin":"bob","ip":"1.2.3.4","items":[{"promoId":"P","type":2,"num":1,"shard":1}]} {}`,
	} {
		if _, err := DecodeRequestIndex([]byte(raw)); err == nil {
			t.Errorf("%s: accepted %s", name, raw)
		}
	}
	ok := `{"h":"x","pin":"bob","ip":"1.2.3.4","items":[{"promoId":"P","type":2,"num":1,"shard":1,"bucket":7,"buckets":8}],"at":5}`
	if _, err := DecodeRequestIndex([]byte(ok)); err != nil {
		t.Fatalf("refused a good entry: %v", err)
	}
}
