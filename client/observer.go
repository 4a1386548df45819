package client

import "time"

// Op names a call, for observers and errors; the values suit a metric label.
type Op string

// The calls of the two clients.
const (
	OpGrab            Op = "grab"
	OpCancel          Op = "cancel"
	OpConfirm         Op = "confirm"
	OpStatus          Op = "status"
	OpCreatePromotion Op = "create_promotion"
	OpGetPromotion    Op = "get_promotion"
	OpListPromotions  Op = "list_promotions"
	OpPatchPromotion  Op = "patch_promotion"
	OpStopPromotion   Op = "stop_promotion"
	OpDeletePromotion Op = "delete_promotion"
)

// AttemptInfo describes one HTTP send of a call.
type AttemptInfo struct {
	Op        Op
	RequestID string // the grab's requestId (grab, cancel, confirm), else ""
	Attempt   int    // 1 for the call's first send
	// StatusCode is the answer's HTTP status, 0 when none came.
	StatusCode int
	// Outcome is the answer's result or code; else HTTP_<status> for a body of
	// neither, TRANSPORT_ERROR, CANCELED or DEADLINE_EXCEEDED. A bounded set: fit
	// for a metric label.
	Outcome  string
	Duration time.Duration
	Err      error         // the transport's error, when there was one
	Retry    bool          // another send of the call follows
	Wait     time.Duration // the wait before it
}

// CallInfo describes a call once it is over, retries included.
type CallInfo struct {
	Op         Op
	RequestID  string
	Attempts   int
	StatusCode int    // of the last answer
	Outcome    string // of the last answer, as in AttemptInfo
	Duration   time.Duration
	Err        error // nil when the call succeeded
}

// Observer sees every send and every call's end: the hook for metrics (a
// Prometheus counter by Op and Outcome, a histogram of Duration) and logs. It is
// called on the caller's goroutine, and must not block.
type Observer interface {
	OnAttempt(AttemptInfo)
	OnResult(CallInfo)
}

// ObserverFuncs is an Observer of two functions, either of which may be nil.
type ObserverFuncs struct {
	Attempt func(AttemptInfo)
	Result  func(CallInfo)
}

func (o ObserverFuncs) OnAttempt(a AttemptInfo) {
	if o.Attempt != nil {
		o.Attempt(a)
	}
}

func (o ObserverFuncs) OnResult(c CallInfo) {
	if o.Result != nil {
		o.Result(c)
	}
}

type noObserver struct{}

func (noObserver) OnAttempt(AttemptInfo) {}
func (noObserver) OnResult(CallInfo)     {}
