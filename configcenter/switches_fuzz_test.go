package configcenter

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
)

// The switches document is written by hand at 20:00 on a sale's night and applied
// by every instance within a second: whatever it holds, Parse answers (it does not
// panic), an accepted document keeps the bounds the hot path relies on, and the
// switches it yields read back from their own encoding unchanged, as configctl
// writes them.
func FuzzParseSwitches(f *testing.F) {
	f.Add([]byte(`{"grabEnabled":true,"kafkaDegrade":true,"degradeRateFactor":0.5,"degradeMaxPerSecond":300,` +
		`"methodLimits":{"grab":100,"cancel":10},"blockedPromotions":["P1_1"],"blockedPins":["bob"],"blockedIps":["10.0.0.0/8","2001:db8::1"],` +
		`"shardAddrs":{"3":"redis-shard-3-1.redis:6379"}}`))
	f.Add([]byte(`{"degradeRateFactor":2}`))
	f.Add([]byte(`{"shardAddrs":{"16":"x:1","03":"y:2"}}`))
	f.Add([]byte(`{"blockedPins":["b\u202eob"],"blockedIps":["::ffff:10.0.0.1/120"]}`))
	f.Add([]byte(`{} {}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		s, err := Parse(doc)
		if err != nil {
			return
		}
		sw := s.Switches
		if sw.DegradeRateFactor < 0 || sw.DegradeRateFactor > 1 || sw.DegradeMaxPerSecond < 1 || sw.DegradeMaxPerSecond > MaxDegradeMaxPerSecond ||
			sw.MethodLimits.Grab < 0 || sw.MethodLimits.Cancel < 0 {
			t.Fatalf("accepted a limit out of its bounds: %q -> %+v", doc, sw)
		}
		for shard := range s.ShardAddrOverrides() {
			if shard < 0 || shard >= ring.Shards {
				t.Fatalf("accepted shard %d: %q", shard, doc)
			}
		}
		for _, p := range sw.BlockedPins {
			if !promo.ValidPin(p) {
				t.Fatalf("accepted blocked pin %q", p)
			}
		}
		_ = s.BlockedBuyer("bob", "2001:db8::1") // a lookup on what was accepted answers
		again, err := json.Marshal(sw)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := Parse(again)
		if err != nil {
			t.Fatalf("the accepted switches' own encoding is refused: %s: %v", again, err)
		}
		if len(sw.ShardAddrs) == 0 && len(s2.Switches.ShardAddrs) == 0 { // {} and absent say the same
			s2.Switches.ShardAddrs = sw.ShardAddrs
		}
		if !reflect.DeepEqual(s2.Switches, sw) {
			t.Fatalf("re-encoding changed the switches: %+v -> %+v", sw, s2.Switches)
		}
	})
}
