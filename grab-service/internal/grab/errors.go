package grab

import "errors"

// The service's refusals that are errors rather than a Result; grabtransport
// (encode.go) maps each to the contract's HTTP answer, once.
var (
	// ErrPromotionNotFound answers a status request for a promotion that does not exist.
	ErrPromotionNotFound = errors.New("promotion not found")
	// ErrGrabNotFound answers a cancel of a request that holds nothing granted.
	ErrGrabNotFound = errors.New("no granted grab with that requestId for that pin")
	// ErrStatusRateLimited answers a status the cache does not hold while the
	// instance is at its status rate.
	ErrStatusRateLimited = errors.New("this instance is at its rate limit of status reads not answered from its cache; retry")
)
