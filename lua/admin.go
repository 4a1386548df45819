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
	// Buckets is the bucket count of the promotion the hash is one of (create only;
	// 0 or 1: an ordinary promotion).
	Buckets int
	// Envelope is an envelope pool's parts, their amounts in the order they are
	// handed out, Total of them (create only; empty: no pool).
	Envelope []int64
	// Channels are the channels the promotion is sold on (the hash's field
	// channels, a promo.Channels bitmask; 0 = every channel, no field).
	Channels promo.Channels
}

// AdminReply is an admin script's answer: for patch.lua, Remaining for OK and
// ALREADY_APPLIED, Granted (total - remaining) for OK, ALREADY_APPLIED and
// BELOW_GRANTED. Changes are the sale state changes the call made (patch, stop,
// delete), for the caller to publish (state.go).
type AdminReply struct {
	Code      AdminCode
	Remaining int64
	Granted   int64
	Changes   []promo.StateChange
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
	if !s.Channels.Valid() {
		return fmt.Errorf("%s %s: channels %#x beyond the contract's", op, key, uint8(s.Channels))
	}
	return nil
}

// poolAmount checks an envelope pool's parts against the spec (Total of them, of
// one bucket, each at least 1: a pool is a hash whose envAmount is above 0) and
// sums them.
func (s AdminSpec) poolAmount(key string) (int64, error) {
	if int64(len(s.Envelope)) != s.Total || s.Buckets > 1 {
		return 0, fmt.Errorf("create %s: a pool of %d parts for total %d in %d buckets, want total parts in one", key, len(s.Envelope), s.Total, s.Buckets)
	}
	var sum int64
	for i, a := range s.Envelope {
		if a < 1 {
			return 0, fmt.Errorf("create %s: part %d of the pool is %d, below 1", key, i, a)
		}
		sum += a
	}
	return sum, nil
}

func (s AdminSpec) args() []interface{} {
	return []interface{}{s.Ver, s.Total, s.PerPin, s.PerIP, s.MaxPerGrab, s.RateLimit, s.RateWindowMs, s.StartMs, s.EndMs}
}

func adminReply(cmd *redis.Cmd, script string) ([]int64, AdminReply, error) {
	r, changes, err := replyParts(cmd, script, 1)
	if err != nil {
		return nil, AdminReply{}, err
	}
	c := AdminCode(r[0])
	if c < AdminOK || c > AdminFenced {
		return nil, AdminReply{}, fmt.Errorf("%s: unknown code %d", script, r[0])
	}
	return r, AdminReply{Code: c, Changes: changes}, nil
}

// The admin scripts run on the client c of logical shard shard, and refuse with
// FENCED, changing nothing, while that shard's fence marker (promo.FenceKey) is set:
// a rebuild would overwrite a change made meanwhile with the record it read before.

// Create writes the promotion hash of key (promo.Key) with remaining = total,
// after emptying its companions. OK, ALREADY_APPLIED (same Ver present), EXISTS or FENCED.
//
// A pool's parts (s.Envelope) are staged first, a bounded chunk per command, and
// create.lua moves them into place with the hash, all at once.
func Create(ctx context.Context, c redis.Cmdable, shard int, key string, s AdminSpec) (AdminCode, error) {
	if err := s.check("create", key); err != nil {
		return 0, err
	}
	if s.State != string(promo.Active) && s.State != string(promo.Stopped) {
		return 0, fmt.Errorf("create %s: state %q, want ACTIVE or STOPPED", key, s.State)
	}
	ks := promo.Keys(key)
	keys := append(ks[:], promo.FenceKey(shard))
	args := append(s.args(), s.State, int64(s.Channels))
	if s.Buckets > 1 {
		args = append(args, s.Buckets)
	}
	if len(s.Envelope) > 0 {
		amount, err := s.poolAmount(key)
		if err != nil {
			return 0, err
		}
		if err := stageEnvelope(ctx, c, key, s.Envelope); err != nil {
			return 0, err
		}
		keys = append(keys, promo.EnvelopeStagingKey(key))
		args = append(s.args(), s.State, int64(s.Channels), 1, amount, EnvelopeDigest(s.Envelope))
	}
	_, out, err := adminReply(createScript.Run(ctx, c, keys, args...), "create.lua")
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", key, err)
	}
	return out.Code, nil
}

// Patch applies a new spec version (State is ignored) at nowMs: remaining becomes
// total - granted. OK, ALREADY_APPLIED, NOT_FOUND, STALE, STOPPED, BELOW_GRANTED or FENCED.
func Patch(ctx context.Context, c redis.Scripter, shard int, key string, s AdminSpec, nowMs int64) (AdminReply, error) {
	if err := s.check("patch", key); err != nil {
		return AdminReply{}, err
	}
	return patch(ctx, c, shard, key, s, append(s.args(), nowMs, int64(s.Channels)))
}

// PatchFrom is Patch applied only to a hash at version fromVer: it takes a hash
// back to an earlier spec s (s.Ver below fromVer) when a change of a promotion in
// buckets is undone. ALREADY_APPLIED when the hash is at s.Ver, STALE when it is
// at neither; otherwise as Patch.
func PatchFrom(ctx context.Context, c redis.Scripter, shard int, key string, s AdminSpec, fromVer, nowMs int64) (AdminReply, error) {
	if err := s.check("patch", key); err != nil {
		return AdminReply{}, err
	}
	if fromVer < 0 {
		return AdminReply{}, fmt.Errorf("patch %s: negative fromVer %d", key, fromVer)
	}
	return patch(ctx, c, shard, key, s, append(s.args(), nowMs, int64(s.Channels), fromVer))
}

func patch(ctx context.Context, c redis.Scripter, shard int, key string, s AdminSpec, args []interface{}) (AdminReply, error) {
	r, out, err := adminReply(patchScript.Run(ctx, c, []string{key, promo.FenceKey(shard), promo.StateOutboxKey}, args...), "patch.lua")
	if err != nil {
		return AdminReply{}, fmt.Errorf("patch %s: %w", key, err)
	}
	code := out.Code
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

// Stop sets the promotion STOPPED at version ver, at nowMs. OK (idempotent),
// NOT_FOUND, STALE or FENCED.
func Stop(ctx context.Context, c redis.Scripter, shard int, key string, ver, nowMs int64) (AdminReply, error) {
	if key == "" || ver < 0 {
		return AdminReply{}, fmt.Errorf("stop %q: bad key or version %d", key, ver)
	}
	_, out, err := adminReply(stopScript.Run(ctx, c, []string{key, promo.FenceKey(shard), promo.StateOutboxKey}, ver, nowMs), "stop.lua")
	if err != nil {
		return AdminReply{}, fmt.Errorf("stop %s: %w", key, err)
	}
	return out, nil
}

// DeletedLedgerKeep is how long a deleted promotion's request ledger and pending
// set stay: the reconciler settles its open takes by the ledger within minutes of
// their deadlines, and the takes of other promotions in the same requests follow
// its entries. A day covers a shard down for hours (alert ReconcileTakesBlocked).
const DeletedLedgerKeep = 24 * time.Hour

// Delete removes the promotion hash, pins and ips, and lets the ledger and
// pending set expire after DeletedLedgerKeep (see delete.lua). OK, or NOT_FOUND
// when the hash was already gone (the rest is done all the same), or FENCED.
func Delete(ctx context.Context, c redis.Scripter, shard int, key string, ver, nowMs int64) (AdminReply, error) {
	if key == "" {
		return AdminReply{}, fmt.Errorf("delete: empty key")
	}
	ks := promo.Keys(key)
	keys := append(ks[:], promo.FenceKey(shard), promo.StateOutboxKey)
	_, out, err := adminReply(deleteScript.Run(ctx, c, keys, ver, DeletedLedgerKeep.Milliseconds(), nowMs), "delete.lua")
	if err != nil {
		return AdminReply{}, fmt.Errorf("delete %s: %w", key, err)
	}
	return out, nil
}
