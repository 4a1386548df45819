package rebuild

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
)

// Record is what a rebuild reads from the system of record (*store.Store).
type Record interface {
	LivePromotions(ctx context.Context) ([]store.Promotion, error)
	FlowCounters(ctx context.Context, id store.ID) (store.FlowCounters, error)
	EachLedgerRow(ctx context.Context, id store.ID, fn func(store.LedgerRow) error) error
}

// rollbackReason is the CANCEL reason of an aborted take (grab-service's
// reconciler), whose ledger entry ends as X rather than R.
const rollbackReason = "ROLLBACK"

// Restored counts what one promotion's rebuild wrote.
type Restored struct {
	Key       string
	Remaining int64
	Pins, IPs int
	Ledger    int
	// NoBodyHash counts ledger entries whose GRAB row has no body hash (written
	// before migration 0002, or by a producer that does not send it): they are
	// restored with h = "", so a replay of them answers REQUEST_ID_REUSED.
	NoBodyHash int
	Warnings   []string
}

// staging names where a promotion is built before it replaces the live keys. They
// carry the promotion key as hash tag, so RENAME stays within one slot.
type staging struct{ hash, pins, ips, req string }

func stagingOf(key string) staging {
	p := "{" + key + "}:rebuild:"
	return staging{p + "hash", p + "pins", p + "ips", p + "req"}
}

// restorePromotion writes one promotion from the record: first into staging keys
// (pipelined), then one MULTI replaces the five live keys with them. Whatever
// happens in between, the live promotion is either the old one or the rebuilt one,
// never half of each.
func restorePromotion(ctx context.Context, c redis.UniversalClient, rec Record, p store.Promotion, batch int) (Restored, error) {
	id := p.ID()
	key := id.Key()
	out := Restored{Key: key}
	counters, err := rec.FlowCounters(ctx, id)
	if err != nil {
		return out, err
	}
	st := stagingOf(key)
	w := newPipe(ctx, c, batch)
	if err := w.do("UNLINK", st.hash, st.pins, st.ips, st.req); err != nil { // leftovers of a killed run
		return out, err
	}

	out.Remaining = p.Spec.Total - counters.Net()
	if out.Remaining < 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s: the flow log grants %d of total %d; remaining written as 0", key, counters.Net(), p.Spec.Total))
		out.Remaining = 0
	}
	if p.Remaining != out.Remaining {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s: promotion.remaining is %d but the flow log gives %d; the flow log wins", key, p.Remaining, out.Remaining))
	}
	if p.Pending != nil {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s: admin change %s v%d pending; restored v%d, promo-admin's resolver settles the change", key, p.Pending.Op, p.Pending.Version, p.Version))
	}
	h := &hset{w: w, key: st.hash}
	for _, f := range hashFields(p, out.Remaining) {
		if err := h.put(f[0].(string), f[1]); err != nil {
			return out, err
		}
	}
	if err := h.close(); err != nil {
		return out, err
	}

	if out.Pins, err = putCounters(w, st.pins, counters.Pins, key, "pin", &out.Warnings); err != nil {
		return out, err
	}
	if out.IPs, err = putCounters(w, st.ips, counters.IPs, key, "ip", &out.Warnings); err != nil {
		return out, err
	}
	req := &hset{w: w, key: st.req}
	err = rec.EachLedgerRow(ctx, id, func(r store.LedgerRow) error {
		b, err := json.Marshal(ledgerEntry(r))
		if err != nil {
			return fmt.Errorf("encode ledger entry %s of %s: %w", r.RequestID, key, err)
		}
		out.Ledger++
		if r.BodyHash == "" {
			out.NoBodyHash++
		}
		return req.put(r.RequestID, b)
	})
	if err != nil {
		return out, err
	}
	if err := req.close(); err != nil {
		return out, err
	}
	if err := w.flush(); err != nil {
		return out, fmt.Errorf("stage %s: %w", key, err)
	}
	if err := swap(ctx, c, key, st, out); err != nil {
		return out, err
	}
	return out, nil
}

// hashFields is the promotion hash (lua/README.md) as create.lua writes it, with
// remaining from the record and the rate window restarting empty.
func hashFields(p store.Promotion, remaining int64) [][2]any {
	s := p.Spec
	var rateLimit, windowMs int64
	if s.RateLimit != nil {
		rateLimit, windowMs = s.RateLimit.Limit, s.RateLimit.WindowSeconds*1000
	}
	state := string(promo.Active)
	if p.State != promo.Active {
		state = string(promo.Stopped) // the hash knows ACTIVE and STOPPED only
	}
	return [][2]any{
		{"ver", p.Version}, {"total", s.Total}, {"remaining", remaining},
		{"perPin", s.PerPinLimit}, {"perIp", s.PerIPLimit}, {"maxPerGrab", s.MaxPerGrab},
		{"rateLimit", rateLimit}, {"rateWindowMs", windowMs}, {"winCount", 0}, {"winStart", 0},
		{"startMs", s.StartAt.UnixMilli()}, {"endMs", s.EndAt.UnixMilli()}, {"state", state},
	}
}

// putCounters writes the non-zero counters; a negative one (a CANCEL the record
// kept without its GRAB, which the sink never stores) is left out and reported.
func putCounters(w *pipe, key string, counters map[string]int64, promoKey, what string, warnings *[]string) (int, error) {
	h := &hset{w: w, key: key}
	n := 0
	for who, v := range counters {
		if v < 0 {
			*warnings = append(*warnings, fmt.Sprintf("%s: %s %q nets %d in the flow log; left out", promoKey, what, who, v))
			continue
		}
		if err := h.put(who, v); err != nil {
			return n, err
		}
		n++
	}
	return n, h.close()
}

// ledgerEntry is the settled entry a request leaves: G while granted, R once
// returned, X when the return was the rollback of an aborted take. The deadline
// only matters to pending entries, and a rebuilt ledger has none, so it is 0.
func ledgerEntry(r store.LedgerRow) lua.LedgerEntry {
	e := lua.LedgerEntry{State: lua.LedgerCommitted, BodyHash: r.BodyHash, Num: r.Num, Pin: r.Pin, IP: r.IP}
	switch {
	case r.Cancelled && r.CancelReason == rollbackReason:
		e.State = lua.LedgerAbortRecorded
	case r.Cancelled:
		e.State, e.Reason = lua.LedgerReturned, r.CancelReason
	}
	return e
}

// swap replaces the live keys with the staged ones in one transaction; the pending
// set starts empty.
func swap(ctx context.Context, c redis.UniversalClient, key string, st staging, r Restored) error {
	live := promo.Keys(key)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Unlink(ctx, live[:]...)
		p.Rename(ctx, st.hash, live[0])
		if r.Pins > 0 {
			p.Rename(ctx, st.pins, live[1])
		}
		if r.IPs > 0 {
			p.Rename(ctx, st.ips, live[2])
		}
		if r.Ledger > 0 {
			p.Rename(ctx, st.req, live[3])
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("swap in the rebuilt %s: %w", key, err)
	}
	return nil
}
