package grab

import "github.com/flashsale/platform/internal/expiry"

// refusalCache is the sold-out short-circuit (the Alibaba and 12306 idea): once a
// promotion is known SOLD_OUT, STOPPED, ENDED or NOT_FOUND, grabs for it are answered
// here without Redis (promotion key -> outcome). Entries expire after RefusalTTL,
// which bounds how long a SOLD_OUT stays stale after a cancel on another instance
// returns stock. Only a script's answer sets an entry, never an error, so one
// failure cannot refuse everyone.
type refusalCache = expiry.Map[Outcome]

func cacheable(o Outcome) bool {
	return o == SoldOut || o == Stopped || o == Ended || o == NotFound
}
