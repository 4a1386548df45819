package promo

import "strconv"

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
func PendingKey(key string) string { return "{" + key + "}:pending" }

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

// The shard markers, one pair per logical shard on that shard's server, written by
// the rebuild (recovery/internal/rebuild/markers.go) and read by grab-service's fence
// and by the admin scripts:
//
//   - FenceKey is set while a rebuild works on the shard, with a TTL the rebuild keeps
//     refreshing, so a killed rebuild does not fence forever. Grabs, cancels and admin
//     changes of the shard's promotions are refused meanwhile.
//   - BuiltKey says the shard's contents are whole: written when a rebuild of the whole
//     shard commits (or by grab-service when the record holds no promotion of the shard,
//     so there is nothing to rebuild). A server that lost its data lost this marker too.
//     It names the server it was written on (internal/shardmark), so a replica promoted
//     in a failover, which holds its master's marker, is not taken for whole.
//   - ServingKey is a hash in which every grab-service instance reports, each time it
//     reads the two markers, whether it serves the shard: the rebuild returns only
//     once every live instance serves the shard it rebuilt (internal/shardmark).

// FenceKey names the fence marker of a shard.
func FenceKey(shard int) string { return "flashsale:fence:" + strconv.Itoa(shard) }

// BuiltKey names the built marker of a shard.
func BuiltKey(shard int) string { return "flashsale:built:" + strconv.Itoa(shard) }

// ServingKey names the hash of grab-service instances' serving reports for a shard.
func ServingKey(shard int) string { return "flashsale:serving:" + strconv.Itoa(shard) }
