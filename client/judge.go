package client

import (
	"net/http"
)

// verdict is what a call does after an answer.
type verdict int

const (
	success verdict = iota // the call's answer: return it
	refuse                 // a final answer that is not the call's success: return it as an *Error
	retry                  // send again, if the policy and the deadline allow
)

// knowledge is what an answer tells of the call's effect so far.
type knowledge int

const (
	unchanged knowledge = iota // nothing of the sends before it
	settled                    // the effect is known (done, or nothing)
	uncertain                  // this send may have had an effect unseen
)

func (k knowledge) apply(unknown bool) bool {
	switch k {
	case settled:
		return false
	case uncertain:
		return true
	}
	return unknown
}

// judge reads the n-th answer of a call; replay is set when the service may have
// seen the request before (any send of a grab but a first one).
type judge func(a *answer, n int, replay bool) (verdict, knowledge)

// sentNothing is the knowledge of a send that got no answer: none when it never
// left (a failed dial), else it may have been served.
func sentNothing(a *answer) knowledge {
	if dialFailed(a.err) {
		return unchanged
	}
	return uncertain
}

// judgeGrab follows api/openapi.yaml's POST /v1/grab: 200 GRANTED; 409 and 403
// BLOCKED are refusals, and so is 503 DEGRADED (on-call switched grabs off: not
// a matter of seconds); 429 is retried after its Retry-After; 503 UNAVAILABLE, 5xx
// and no answer are retried with the same body, since a replay answers the first
// answer and takes nothing twice. A 503 to a first send took nothing; to a replay
// it may mean the first answer is not known yet.
func judgeGrab(a *answer, _ int, replay bool) (verdict, knowledge) {
	switch {
	case a.status == 0:
		return retry, sentNothing(a)
	case a.status == http.StatusOK && a.body.Result == ResultGranted:
		return success, settled
	case a.status == http.StatusConflict && a.body.Result != "",
		a.status == http.StatusForbidden && a.body.Result == ResultBlocked:
		return refuse, settled
	case a.status == http.StatusTooManyRequests:
		// The limits and the degrade cap refuse only sends that hold no claim (a
		// resend of a claimed requestId passes them to its first answer), so a 429
		// says nothing is held under the requestId.
		return retry, settled
	case a.status == http.StatusServiceUnavailable && a.body.Result == ResultDegraded:
		return refuse, unchanged
	case a.status == http.StatusServiceUnavailable && a.body.Result == ResultUnavailable:
		return judgeUnavailable(a.body.Decision, replay)
	case a.status >= 500:
		return retry, uncertain
	}
	return refuse, unchanged
}

// judgeUnavailable reads a grab's UNAVAILABLE by its decision. One without a
// decision (an older service) is read as UNDECIDED: retried for its outcome,
// never taken for nothing taken.
func judgeUnavailable(d Decision, replay bool) (verdict, knowledge) {
	switch {
	case d == DecisionRolledBack: // every replay answers the same: retrying learns nothing
		return refuse, settled
	case d != DecisionNothingTaken:
		return retry, uncertain
	case !replay:
		return retry, settled
	}
	return retry, unchanged
}

// judgeReturn follows the cancel (and, with its 409, the confirm): 200 is the
// answer; 503, 5xx and no answer are retried (both are idempotent), and leave the
// outcome open (a 503 cancel may have returned part of the grab); 429 is retried
// after its Retry-After; anything else is final.
func judgeReturn(a *answer, _ int, _ bool) (verdict, knowledge) {
	switch {
	case a.status == 0:
		return retry, sentNothing(a)
	case a.status == http.StatusOK && a.body.Result != "":
		return success, settled
	case a.status == http.StatusOK: // not a GrabResult: not the API's answer
		return refuse, uncertain
	case a.status == http.StatusConflict && a.body.Result != "":
		return refuse, settled
	case a.status == http.StatusTooManyRequests:
		// The limits and the degrade cap refuse only sends that hold no claim (a
		// resend of a claimed requestId passes them to its first answer), so a 429
		// says nothing is held under the requestId.
		return retry, settled
	case a.status >= 500:
		return retry, uncertain
	}
	return refuse, unchanged
}

// judgeRead is for the GETs: retried on no answer, 429, 502, 503 and 504.
func judgeRead(a *answer, _ int, _ bool) (verdict, knowledge) {
	switch a.status {
	case 0, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retry, unchanged
	case http.StatusOK:
		return success, settled
	}
	return refuse, unchanged
}

// judgeAdminWrite is for promo-admin's changes: BUSY ("retry in a few seconds"),
// 502, 503 (the change did not land, or is pending and the repairer resolves it)
// and 504 are retried, and so is no answer; a 503 or no answer leaves the
// change's fate open. INTERNAL is not retried: the change may be pending.
func judgeAdminWrite(a *answer, _ int, _ bool) (verdict, knowledge) {
	switch {
	case a.status == 0:
		return retry, sentNothing(a)
	case a.status >= 200 && a.status < 300:
		return success, settled
	case a.status == http.StatusConflict && a.body.Code == CodeBusy:
		return retry, unchanged
	case a.status == http.StatusBadGateway, a.status == http.StatusServiceUnavailable, a.status == http.StatusGatewayTimeout:
		return retry, uncertain
	case a.status >= 500:
		return refuse, uncertain
	}
	return refuse, unchanged
}
