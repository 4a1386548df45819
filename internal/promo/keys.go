package promo

import "strconv"

// Key builders: the one place Redis key names are made. Every companion key carries
// the promotion hash key inside {} so that, on Redis Cluster too, all keys a script
// touches for one promotion hash to the same slot (CONTRACT.md, "Shard ring").

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

// Keys returns the promotion hash and its companions in the order the scripts take them.
func Keys(key string) [5]string {
	return [5]string{key, PinsKey(key), IPsKey(key), LedgerKey(key), PendingKey(key)}
}
