package httpx

import (
	"net/http"
	"strconv"
	"time"
)

// SetRetryAfter sets the Retry-After header to d in whole seconds, rounded up so
// a client never retries before d has passed; d of 0 or less sets nothing.
func SetRetryAfter(w http.ResponseWriter, d time.Duration) {
	if d > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	}
}
