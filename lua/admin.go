package lua

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// AdminSpec is a promotion's spec as the hash stores it. Ver is the spec version
// from MySQL; times are unix ms; zero limits mean unlimited. State ("ACTIVE" or
// "STOPPED") is used by Create only.
type AdminSpec struct {
	Ver, Total, PerPin, PerIP, MaxPerGrab, RateLimit, RateWindowMs, StartMs, EndMs int64
	State                                                                          string
}

// AdminReply is patch.lua's answer: Remaining for OK and ALREADY_APPLIED, Granted
// (total - remaining) for OK, ALREADY_APPLIED and BELOW_GRANTED.
type AdminReply struct {
	Code      AdminCode
	Remaining int64
	Granted   int64
}

func (s AdminSpec) check(op, key string) error {
	if key == "" {
		return fmt.Errorf("%s: empty key", op)
	}
	for _, v := range []int64{s.Ver, s.Total, s.PerPin, s.PerIP, s.RateLimit, s.RateWindowMs, s.StartMs, s.EndMs} {
		if v < 0 {
			return fmt.Errorf("%s %s: negative value in spec %+v", op, key, s)
		}
	}
	if s.MaxPerGrab < 1 {
		return fmt.Errorf("%s %s: maxPerGrab %d < 1", op, key, s.MaxPerGrab)
	}
	if s.RateLimit > 0 && s.RateWindowMs < 1 {
		return fmt.Errorf("%s %s: rate limit without a window", op, key)
	}
	return nil
}

func (s AdminSpec) args() []interface{} {
	return []interface{}{s.Ver, s.Total, s.PerPin, s.PerIP, s.MaxPerGrab, s.RateLimit, s.RateWindowMs, s.StartMs, s.EndMs}
}

func adminCode(cmd *redis.Cmd, script string) ([]int64, AdminCode, error) {
	r, err := replyInts(cmd, script, 1)
	if err != nil {
		return nil, 0, err
	}
	c := AdminCode(r[0])
	if c < AdminOK || c > AdminFenced {
		return nil, 0, fmt.Errorf("%s: unknown code %d", script, r[0])
	}
	return r, c, nil
}

// The admin scripts run on the client c of logical shard shard, and refuse with
// FENCED, changing nothing, while that shard's fence marker (promo.FenceKey) is set:
// a rebuild would overwrite a change made meanwhile with the record it read before.

// Create writes the promotion hash of key (promo.Key) with remaining = total,
// after emptying its companions. OK, ALREADY_APPLIED (same Ver present), EXISTS or FENCED.
func Create(ctx context.Context, c redis.Scripter, shard int, key string, s AdminSpec) (AdminCode, error) {
	if err := s.check("create", key); err != nil {
		return 0, err
	}
	if s.State != string(promo.Active) && s.State != string(promo.Stopped) {
		return 0, fmt.Errorf("create %s: state %q, want ACTIVE or STOPPED", key, s.State)
	}
	ks := promo.Keys(key)
	_, code, err := adminCode(createScript.Run(ctx, c, append(ks[:], promo.FenceKey(shard)), append(s.args(), s.State)...), "create.lua")
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", key, err)
	}
	return code, nil
}

// Patch applies a new spec version (State is ignored): remaining becomes
// total - granted. OK, ALREADY_APPLIED, NOT_FOUND, STALE, STOPPED, BELOW_GRANTED or FENCED.
func Patch(ctx context.Context, c redis.Scripter, shard int, key string, s AdminSpec) (AdminReply, error) {
	if err := s.check("patch", key); err != nil {
		return AdminReply{}, err
	}
	r, code, err := adminCode(patchScript.Run(ctx, c, []string{key, promo.FenceKey(shard)}, s.args()...), "patch.lua")
	if err != nil {
		return AdminReply{}, fmt.Errorf("patch %s: %w", key, err)
	}
	out := AdminReply{Code: code}
	switch {
	case (code == AdminOK || code == AdminAlreadyApplied) && len(r) >= 3:
		out.Remaining, out.Granted = r[1], r[2]
	case code == AdminBelowGranted && len(r) >= 2:
		out.Granted = r[1]
	case code == AdminOK || code == AdminAlreadyApplied || code == AdminBelowGranted:
		return AdminReply{}, fmt.Errorf("patch %s: short reply %v", key, r)
	}
	return out, nil
}

// Stop sets the promotion STOPPED at version ver. OK (idempotent), NOT_FOUND, STALE or FENCED.
func Stop(ctx context.Context, c redis.Scripter, shard int, key string, ver int64) (AdminCode, error) {
	if key == "" || ver < 0 {
		return 0, fmt.Errorf("stop %q: bad key or version %d", key, ver)
	}
	_, code, err := adminCode(stopScript.Run(ctx, c, []string{key, promo.FenceKey(shard)}, ver), "stop.lua")
	if err != nil {
		return 0, fmt.Errorf("stop %s: %w", key, err)
	}
	return code, nil
}

// DeletedLedgerKeep is how long a deleted promotion's request ledger and pending
// set stay: the reconciler settles its open takes by the ledger within minutes of
// their deadlines, and the takes of other promotions in the same requests follow
// its entries. A day covers a shard down for hours (alert ReconcileTakesBlocked).
const DeletedLedgerKeep = 24 * time.Hour

// Delete removes the promotion hash, pins and ips, and lets the ledger and
// pending set expire after DeletedLedgerKeep (see delete.lua). OK, or NOT_FOUND
// when the hash was already gone (the rest is done all the same), or FENCED.
func Delete(ctx context.Context, c redis.Scripter, shard int, key string, ver int64) (AdminCode, error) {
	if key == "" {
		return 0, fmt.Errorf("delete: empty key")
	}
	ks := promo.Keys(key)
	_, code, err := adminCode(deleteScript.Run(ctx, c, append(ks[:], promo.FenceKey(shard)), ver, DeletedLedgerKeep.Milliseconds()), "delete.lua")
	if err != nil {
		return 0, fmt.Errorf("delete %s: %w", key, err)
	}
	return code, nil
}
