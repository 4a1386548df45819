// Package checker checks docs/CONTRACT.md's invariants across the whole stack at
// once, for the fault drills: it reconciles request by request what clients were
// told with Redis (hashes, counters, request ledgers), the MySQL flow log and the
// Kafka topic, four witnesses of each request's fate that must agree, and checks an
// envelope pool's money the same way (invariant 7, envelope.go). The witnesses are
// told in docs/design.md, "Drills and checker".
package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/flashsale/platform/internal/promo"
)

// Promotion is one promotion under check, as it was created.
type Promotion struct {
	PromoID       string
	Type          int
	Total         int64
	PerPin, PerIP int64
	// Buckets is how many buckets the promotion is split into (0 or 1: one); the
	// checker reads them as one promotion (docs/CONTRACT.md, "Buckets").
	Buckets int
	// EnvelopeAmount is an envelope pool's budget, the sum of its Total envelopes
	// (docs/CONTRACT.md, "Envelope pools"); 0 for a promotion that is no pool.
	EnvelopeAmount int64
}

// IsPool reports whether the promotion is an envelope pool.
func (p Promotion) IsPool() bool { return p.EnvelopeAmount > 0 }

// Key is the promotion's Redis hash key.
func (p Promotion) Key() string { return promo.Key(p.PromoID, p.Type) }

// Item is one promotion of a request.
type Item struct {
	PromoID string
	Type    int
	Num     int64
	// Amount and Returned, of an envelope pool's item: the amount the final GRANTED
	// answer carried, and the amount a RETURNED answer to its cancel carried (0
	// when the client was told no such answer, or the RETURNED answer did not list
	// the item, an earlier attempt of the cancel having returned it).
	Amount, Returned int64
}

// Key is the item's promotion hash key.
func (it Item) Key() string { return promo.Key(it.PromoID, it.Type) }

// Final answers a client can hold besides the contract's results.
const (
	// Unknown: no definite answer arrived (transport errors, 5xx, a take still being
	// committed) before the client gave up retrying.
	Unknown = "UNKNOWN"
)

// Request is what one client learned about one requestId: the final answers only
// (retries with the same requestId and body until a definite answer arrives).
type Request struct {
	RequestID string
	Pin, IP   string
	Items     []Item
	// Grab is the final grab answer: a result of the contract (GRANTED, SOLD_OUT, ...)
	// or Unknown.
	Grab string
	// Cancel is the final cancel answer, "" when the client never cancelled:
	// RETURNED, ALREADY_RETURNED, NOT_FOUND, another code, or Unknown.
	Cancel string
	// Sent and Done bound the request's whole life at the client (grab and cancel,
	// every attempt): a flow event of it can only have been produced in between.
	Sent, Done time.Time
}

// Held reports whether the client holds the grant: granted and not returned since.
// known is false while either answer is Unknown.
func (r Request) Held() (held, known bool) {
	if r.Grab == Unknown || r.Cancel == Unknown {
		return false, false
	}
	if r.Grab != "GRANTED" {
		return false, true
	}
	return r.Cancel != "RETURNED" && r.Cancel != "ALREADY_RETURNED", true
}

// Report is the checker's verdict. Every count must be 0.
type Report struct {
	Promotions, Requests int
	// Oversold: units granted beyond a promotion's total, by any witness, plus units
	// Redis offers for sale beyond what its ledger leaves (a later oversell).
	Oversold int64
	// LimitBreached: (promotion, pin) and (promotion, ip) pairs holding more than the
	// limit, by any witness.
	LimitBreached int
	// Leaked: units taken from stock that no client holds: held in Redis but told
	// otherwise, counters above the ledger, takes still open after settling.
	Leaked int64
	// Lost: units a client holds (told GRANTED, not returned) that Redis does not.
	Lost int64
	// Drift: units on which the MySQL record and Redis disagree (invariant 4), plus
	// events the broker holds that the record lacks.
	Drift int64
	// Unresolved: requests whose client never got a definite answer.
	Unresolved int
	// EnvelopeFaults (invariant 7): envelopes of a pool held by two grants at once
	// by the record, held and in the pool at once, neither held nor in the pool, or
	// taken with the wrong parts (a grab's parts not num of the pool's, a cancel's
	// not its grab's).
	EnvelopeFaults int
	// AmountDrift (invariant 7): money, in the smallest currency unit, that a pool
	// granted beyond its budget by any witness, or on which the witnesses (clients,
	// Redis ledger, envAmount - envLeft, the pool's parts, the record) disagree.
	AmountDrift int64
	// Findings describe the first failures, for the log.
	Findings []string
	// Overflow counts findings not kept.
	Overflow int
}

// Failed reports whether any invariant failed.
func (r *Report) Failed() bool {
	return r.Oversold != 0 || r.LimitBreached != 0 || r.Leaked != 0 || r.Lost != 0 || r.Drift != 0 || r.Unresolved != 0 ||
		r.EnvelopeFaults != 0 || r.AmountDrift != 0
}

const maxFindings = 40

func (r *Report) find(format string, args ...any) {
	if len(r.Findings) >= maxFindings {
		r.Overflow++
		return
	}
	r.Findings = append(r.Findings, fmt.Sprintf(format, args...))
}

// Summary is one line for a log.
func (r *Report) Summary() string {
	verdict := "PASS"
	if r.Failed() {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s: %d promotions, %d requests; oversold %d, leaked %d, lost %d, limit-breached %d, record drift %d, unresolved %d, envelope faults %d, amount drift %d",
		verdict, r.Promotions, r.Requests, r.Oversold, r.Leaked, r.Lost, r.LimitBreached, r.Drift, r.Unresolved, r.EnvelopeFaults, r.AmountDrift)
}

// String lists the summary and the findings.
func (r *Report) String() string {
	var b strings.Builder
	b.WriteString(r.Summary())
	b.WriteByte('\n')
	fs := append([]string(nil), r.Findings...)
	sort.Strings(fs)
	for _, f := range fs {
		b.WriteString("  - ")
		b.WriteString(f)
		b.WriteByte('\n')
	}
	if r.Overflow > 0 {
		fmt.Fprintf(&b, "  ... and %d more\n", r.Overflow)
	}
	return b.String()
}
