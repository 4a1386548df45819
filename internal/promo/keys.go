package promo

import (
	"strconv"
	"strings"
)

// Key builders: the one place Redis key names are made. Every companion key carries
// the promotion hash key inside {} so that, on Redis Cluster too, all keys a script
// touches for one promotion hash to the same slot (docs/CONTRACT.md, "Shard ring").

// Key is the promotion hash key C_<promoId>_<type>, also the routed key of the ring.
func Key(promoID string, typ int) string {
	return "C_" + promoID + "_" + strconv.Itoa(typ)
}

// PinsKey is the hash pin -> units held of the promotion.
func PinsKey(key string) string { return "{" + key + "}:pins" }

// IPsKey is the hash ip -> units held of the promotion.
func IPsKey(key string) string { return "{" + key + "}:ips" }

// LedgerKey is the request ledger hash requestId -> JSON entry (see lua/README.md).
func LedgerKey(key string) string { return "{" + key + "}:req" }

// PendingKey is the sorted set of requestIds taken but not yet committed,
// scored by the deadline (unix ms) after which the reconciler may look at them.
// Of a key pattern ("C_*") it is the SCAN pattern of the pending sets.
func PendingKey(key string) string { return "{" + key + "}:pending" }

// PendingBase is the promotion hash key whose pending set is pendingKey.
func PendingBase(pendingKey string) string {
	return strings.TrimSuffix(strings.TrimPrefix(pendingKey, "{"), "}:pending")
}

// EnvelopeKey is the sorted set of an envelope pool's parts not handed out yet:
// member "<index>:<amount>" scored by index, so parts go out lowest index first and
// a returned part is the next drawn (docs/CONTRACT.md, "Envelope pools"). Empty
// for a promotion that is no pool.
func EnvelopeKey(key string) string { return "{" + key + "}:env" }

// EnvelopeStagingKey is where promo-admin loads a pool's parts, a chunk at a time,
// before create.lua moves them to EnvelopeKey with the hash: no script call ever
// writes a whole pool (lua/README.md).
func EnvelopeStagingKey(key string) string { return "{" + key + "}:envnew" }

// KeysPerItem is how many keys the per-item scripts take for each promotion (Keys).
const KeysPerItem = 6

// Keys returns the promotion hash and its companions in the order the scripts take them.
func Keys(key string) [KeysPerItem]string {
	return [KeysPerItem]string{key, PinsKey(key), IPsKey(key), LedgerKey(key), PendingKey(key), EnvelopeKey(key)}
}

// BucketKey is the hash key of bucket label (above 0) of the promotion hash key
// (internal/bucket chooses the labels; bucket 0 is key itself).
func BucketKey(key string, label int) string { return key + ":b" + strconv.Itoa(label) }

// BucketBase is the promotion hash key a hash key belongs to: key itself, or the
// promotion of a bucket key "<key>:b<label>".
func BucketBase(key string) string {
	for i := len(key) - 1; i > 0; i-- {
		switch c := key[i]; {
		case c >= '0' && c <= '9':
			continue
		case c == 'b' && i >= 2 && key[i-1] == ':' && i < len(key)-1:
			return key[:i-1]
		}
		break
	}
	return key
}

// ParseKey splits a promotion hash key C_<promoId>_<type> into its parts; a
// bucket's key (BucketKey) gives its promotion's.
func ParseKey(key string) (promoID string, typ int, ok bool) {
	key = BucketBase(key)
	if len(key) < 4 || key[:2] != "C_" {
		return "", 0, false
	}
	return SplitPromotionRef(key[2:])
}

// SplitPromotionRef splits "<promoId>_<type>" (promo ids hold no '_').
func SplitPromotionRef(ref string) (promoID string, typ int, ok bool) {
	for i := len(ref) - 1; i >= 0; i-- {
		if ref[i] == '_' {
			t, err := strconv.Atoi(ref[i+1:])
			if err != nil || i == 0 {
				return "", 0, false
			}
			return ref[:i], t, true
		}
	}
	return "", 0, false
}

// RequestIndexKey names the record of which promotions a granted request holds, so a
// cancel can find them; it lives on the shard the ring gives for this key.
func RequestIndexKey(requestID string) string { return "R_" + requestID }

// The shard markers, one set per logical shard on that shard's server: written by
// the rebuild (recovery/internal/rebuild/markers.go), read by grab-service's fence
// and by the admin scripts (docs/design.md, "Scripts and keys").

// FenceKey names the fence marker of a shard: set, with a TTL the rebuild keeps
// refreshing, while a rebuild works on it; its grabs, cancels and admin changes
// are refused meanwhile.
func FenceKey(shard int) string { return "flashsale:fence:" + strconv.Itoa(shard) }

// BuiltKey names the built marker of a shard: its contents are whole. It names the
// server it was written on (internal/shardmark), so a promoted replica holding its
// master's marker is not taken for whole.
func BuiltKey(shard int) string { return "flashsale:built:" + strconv.Itoa(shard) }

// ServingKey names the hash of grab-service instances' serving reports for a shard,
// which the rebuild waits on (internal/shardmark).
func ServingKey(shard int) string { return "flashsale:serving:" + strconv.Itoa(shard) }

// HoldsKey names, on each shard, the holds of the grants whose request index
// entries the shard keeps: requestId by deadline (claimhold.lua).
const HoldsKey = "flashsale:holds"

// ConfirmingKey is where the holds whose CONFIRM is being published wait, beside
// the holds set holds (confirmhold.lua).
func ConfirmingKey(holds string) string { return holds + ":confirming" }

// ExpiringKey is where the holds being returned wait, beside the holds set holds:
// requestId by the end of the returning instance's lease (holddue.lua).
func ExpiringKey(holds string) string { return holds + ":expiring" }

// StateOutboxKey names, on each shard's server, the sorted set of the promotion
// state changes not yet known to be on the promo-state topic (lua/state.lua):
// recorded by the scripts, cleared by their publisher, swept by the reconciler.
const StateOutboxKey = "flashsale:promo-state"
