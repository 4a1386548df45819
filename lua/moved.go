package lua

import "github.com/flashsale/platform/internal/promo"

// Names that moved to internal/promo, where internal/ can reach them without
// importing this package.

// HoldsKey is promo.HoldsKey.
//
// Deprecated: use promo.HoldsKey; kept until grab-service moves.
const HoldsKey = promo.HoldsKey

// StateOutboxKey is promo.StateOutboxKey.
//
// Deprecated: use promo.StateOutboxKey; kept until grab-service moves.
const StateOutboxKey = promo.StateOutboxKey

// StateChange is promo.StateChange.
//
// Deprecated: use promo.StateChange; kept until grab-service moves.
type StateChange = promo.StateChange

// ConfirmingKey is promo.ConfirmingKey.
//
// Deprecated: use promo.ConfirmingKey; kept until grab-service moves.
func ConfirmingKey(holds string) string { return promo.ConfirmingKey(holds) }

// ExpiringKey is promo.ExpiringKey.
//
// Deprecated: use promo.ExpiringKey; kept until grab-service moves.
func ExpiringKey(holds string) string { return promo.ExpiringKey(holds) }

// HoldsStock is promo.HoldsStock.
//
// Deprecated: use promo.HoldsStock; kept until grab-service moves.
func HoldsStock(part string) bool { return promo.HoldsStock(part) }
