package lua

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// GrabItem is one promotion of a grab: its hash key (promo.Key) and the units to take.
type GrabItem struct {
	Key string
	Num int64
	// Part is what this item checks and takes when it is a part of a bucketed grab:
	// a promo.PartStock/PartPin/PartIP combination (q.lua). Empty is an ordinary item.
	Part string
	// Buckets is how many buckets the caller believes the promotion has, sent with
	// the part and checked by q.lua (BUCKETED when wrong); 0 sends no count, which
	// q.lua does not check (an ordinary call always checks for 1).
	Buckets int
}

// GrabCall is one q.lua call: every item must live on the same shard.
type GrabCall struct {
	NowMs, DeadlineMs   int64
	RequestID, BodyHash string
	Pin, IP             string
	// IPKey is the ip's field in {..}:ips, what its per-ip limit counts; empty is
	// promo.IPCounterKey(IP), the process's rule, which every caller should keep.
	IPKey string
	// Channel is the grab's channel (promo.NoChannel when it names none): an
	// item of a promotion not sold on it is refused CodeChannelNotAllowed.
	Channel promo.Channel
	// RateFactorPermille scales the promotion rate limits: 1000 is normal. Zero is a
	// legal factor (every limit then floors to 1 attempt per window), so set it.
	RateFactorPermille int64
	Items              []GrabItem
	// Outbox is the shard's state outbox the call records its changes in; empty
	// is promo.StateOutboxKey (tests sharing servers keep their own).
	Outbox string
	// Claim, when set, is the requestId's claim, made by this call: its index
	// entry must be on this shard. The entry is written with the take (OK), and a
	// requestId that holds one already answers CodeClaimed.
	Claim *GrabClaim
	// Commits are requestIds whose takes hold exactly Items' promotions, one entry
	// each, committed by this call before its take, each decided as commit.lua
	// would, whatever the take answers (ParseGrabCommits reads both).
	Commits []string
}

// GrabClaim is the request index entry a grab claims its requestId with
// (promo.RequestIndexKey) and the entry's time to live.
type GrabClaim struct {
	IndexKey   string
	Entry      []byte
	TTLSeconds int64
}

// GrabReply is q.lua's answer. Index is the 0-based item concerned (0 for OK).
// Remaining holds each item's remaining after the take (OK only); LedgerState the
// ledger entry's state, one of the Ledger* letters (DUPLICATE only); RetryAfterMs the time
// until the rate window restarts (RATE_LIMITED only); StartMs the promotion's start
// (NOT_STARTED only). Changes are the sale state changes the call made (SOLD_OUT
// on OK, ENDED on ENDED), for the caller to publish (state.go). Buckets is the
// promotion's bucket count (BUCKETED only). Envelopes, when an item is of an
// envelope pool, holds what each item took (OK), or its ledger entry holds (DUPLICATE).
type GrabReply struct {
	Code         Code
	Index        int
	Remaining    []int64
	LedgerState  string
	RetryAfterMs int64
	StartMs      int64
	Buckets      int
	IPLimit      bool  // BUCKETED only: the promotion has an ip limit (its grabs count the ip)
	Left         int64 // SOLD_OUT only: what the hash has left (less than num)
	Changes      []promo.StateChange
	Envelopes    []Envelope
}

func (c GrabCall) build() ([]string, []interface{}, error) {
	if c.RequestID == "" {
		return nil, nil, errors.New("grab: empty requestId")
	}
	if c.RateFactorPermille < 0 {
		return nil, nil, fmt.Errorf("grab %s: negative rate factor %d", c.RequestID, c.RateFactorPermille)
	}
	hashKeys := make([]string, len(c.Items))
	ipKey := c.IPKey
	if ipKey == "" {
		ipKey = promo.IPCounterKey(c.IP)
	}
	if c.Channel != promo.NoChannel && c.Channel.String() == "" {
		return nil, nil, fmt.Errorf("grab %s: channel %d is no channel of the contract", c.RequestID, c.Channel)
	}
	args := make([]interface{}, 0, 9+2*len(c.Items))
	args = append(args, c.NowMs, c.RequestID, c.BodyHash, c.Pin, c.IP, c.DeadlineMs, c.RateFactorPermille, ipKey, int64(c.Channel))
	for i, it := range c.Items {
		if it.Num < 1 {
			return nil, nil, fmt.Errorf("grab %s: item %s: num %d < 1", c.RequestID, it.Key, it.Num)
		}
		hashKeys[i] = it.Key
		args = append(args, it.Num)
	}
	args = append(args, c.partArgs()...)
	keys, err := itemKeysAndOutbox(hashKeys, c.Outbox)
	if err != nil {
		return nil, nil, fmt.Errorf("grab %s: %w", c.RequestID, err)
	}
	if len(c.Commits) > 0 {
		arg, err := ridersArg(c.Commits)
		if err != nil {
			return nil, nil, fmt.Errorf("grab %s: %w", c.RequestID, err)
		}
		args = append(args, arg)
	}
	if cl := c.Claim; cl != nil {
		if cl.IndexKey == "" || len(cl.Entry) == 0 || cl.TTLSeconds < 1 {
			return nil, nil, fmt.Errorf("grab %s: a claim needs its index key, entry and a positive time to live", c.RequestID)
		}
		keys = append(keys, cl.IndexKey)
		args = append(args, cl.Entry, cl.TTLSeconds)
	}
	return keys, args, nil
}

// ridersArg is q.lua's argument for the commits riding a take: "commit:" and
// the requestIds, comma-separated (no requestId holds a comma: promo.ValidRequestID).
func ridersArg(rids []string) (string, error) {
	var b strings.Builder
	b.WriteString("commit:")
	for i, rid := range rids {
		if rid == "" || strings.Contains(rid, ",") {
			return "", fmt.Errorf("commit: requestId %q cannot ride a take", rid)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(rid)
	}
	return b.String(), nil
}

// partArgs is each item's part argument (its letters and bucket count), or none
// when no item is a part: ordinary calls stay as they were.
func (c GrabCall) partArgs() []interface{} {
	parts := false
	for _, it := range c.Items {
		parts = parts || it.Buckets > 1 || it.Part != ""
	}
	if !parts {
		return nil
	}
	out := make([]interface{}, 0, len(c.Items))
	for _, it := range c.Items {
		part := cmp.Or(it.Part, promo.PartAll)
		if it.Buckets > 0 {
			part += strconv.Itoa(it.Buckets)
		} else if it.Part == "" {
			part += "1" // an ordinary item among parts is one of one bucket
		}
		out = append(out, part)
	}
	return out
}

// QueueGrab queues q.lua on a pipeline (EVALSHA only: Load the scripts first, and again after NOSCRIPT).
// An invalid call is not queued; its Cmd carries the error for ParseGrab.
func QueueGrab(ctx context.Context, p redis.Pipeliner, c GrabCall) *redis.Cmd {
	keys, args, err := c.build()
	if err != nil {
		return errCmd(ctx, err)
	}
	return qScript.EvalSha(ctx, p, keys, args...)
}

// Grab runs q.lua (EVALSHA, falling back to EVAL on NOSCRIPT); a call with
// Commits is GrabCommitting's.
func Grab(ctx context.Context, c redis.Scripter, call GrabCall) (GrabReply, error) {
	if len(call.Commits) > 0 {
		return GrabReply{}, fmt.Errorf("grab %s: commits ride a take by GrabCommitting", call.RequestID)
	}
	keys, args, err := call.build()
	if err != nil {
		return GrabReply{}, err
	}
	return ParseGrab(qScript.Run(ctx, c, keys, args...))
}

// GrabCommitting runs q.lua with the commits riding it (call.Commits): the take's
// reply, and a code per commit.
func GrabCommitting(ctx context.Context, c redis.Scripter, call GrabCall) (GrabReply, []CommitCode, error) {
	keys, args, err := call.build()
	if err != nil {
		return GrabReply{}, nil, err
	}
	take, codes, err := ParseGrabCommits(qScript.Run(ctx, c, keys, args...), len(call.Commits))
	if err != nil {
		return GrabReply{}, nil, err
	}
	r, err := ParseGrab(take)
	return r, codes, err
}

// ParseGrabCommits splits the reply of a q.lua call that carried n commits
// (GrabCall.Commits) into the take's reply, for ParseGrab, and a code per commit.
// An error of the call is both's.
func ParseGrabCommits(cmd *redis.Cmd, n int) (*redis.Cmd, []CommitCode, error) {
	vals, err := cmd.Slice()
	if err == nil && (len(vals) != 2 || vals[0] == nil) {
		err = fmt.Errorf("q.lua: a take with %d commits answered %v", n, vals)
	}
	if err != nil {
		return redis.NewCmdResult(nil, err), nil, err
	}
	codes, err := ParseCommits(redis.NewCmdResult(vals[1], nil), n)
	return redis.NewCmdResult(vals[0], nil), codes, err
}

// ParseGrab reads q.lua's reply: its code and index, then what the code carries.
func ParseGrab(cmd *redis.Cmd) (GrabReply, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return GrabReply{}, fmt.Errorf("q.lua: %w", err)
	}
	if len(vals) < 2 {
		return GrabReply{}, fmt.Errorf("q.lua: short reply %v", vals)
	}
	code, ok1 := vals[0].(int64)
	index, ok2 := vals[1].(int64)
	if !ok1 || !ok2 {
		return GrabReply{}, fmt.Errorf("q.lua: bad reply %v", vals)
	}
	r := GrabReply{Code: Code(code), Index: int(index)}
	if err := r.readRest(cmd, vals); err != nil {
		return GrabReply{}, err
	}
	return r, nil
}

// readRest reads what the reply's code carries after the code and index.
func (r *GrabReply) readRest(cmd *redis.Cmd, vals []interface{}) error {
	var err error
	switch r.Code {
	case CodeOK, CodeEnded:
		return r.readTaken(cmd)
	case CodeDuplicate:
		return r.readDuplicate(vals)
	case CodeRateLimited:
		r.RetryAfterMs, err = third[int64](vals, "retry time")
	case CodeNotStarted:
		r.StartMs, err = third[int64](vals, "start time")
	case CodeSoldOut:
		if len(vals) > 2 {
			r.Left, err = third[int64](vals, "remaining")
		}
	case CodeBucketed:
		var n int64
		n, err = third[int64](vals, "bucket count")
		r.Buckets = int(n)
		if len(vals) > 3 { // a script of before the flag answers without it: read as a limit
			r.IPLimit = vals[3] != int64(0)
		} else {
			r.IPLimit = true
		}
	case CodeRequestIDReused, CodeNotFound, CodeStopped, CodePinLimit, CodeIPLimit, CodeTooMany, CodeIPPartNeeded, CodeClaimed, CodeChannelNotAllowed:
	default:
		return errors.New("q.lua: unknown code " + strconv.FormatInt(int64(r.Code), 10))
	}
	return err
}

// readTaken reads an OK's or an ENDED's reply: each item's remaining (OK), the
// state changes the call made and, of a pool's items, the envelopes taken.
func (r *GrabReply) readTaken(cmd *redis.Cmd) error {
	ints, changes, envs, err := replyWithEnvelopes(cmd, "q.lua", 2)
	if err != nil {
		return err
	}
	if r.Code == CodeOK {
		r.Remaining = ints[2:]
	}
	r.Changes, r.Envelopes = changes, envs
	if envs != nil && len(envs) != len(r.Remaining) {
		return fmt.Errorf("q.lua: %d envelopes for %d items", len(envs), len(r.Remaining))
	}
	return nil
}

// readDuplicate reads a DUPLICATE's ledger state and, when its entries hold
// envelopes, those.
func (r *GrabReply) readDuplicate(vals []interface{}) error {
	s, err := third[string](vals, "ledger state")
	if err != nil {
		return err
	}
	r.LedgerState = s
	if len(vals) > 3 {
		r.Envelopes, err = parseEnvelopes(vals[3], "q.lua")
	}
	return err
}

// third is the value a reply carries after its code and index: a DUPLICATE's
// ledger state, a RATE_LIMITED's retry time, a NOT_STARTED's start.
func third[T any](vals []interface{}, what string) (T, error) {
	var v T
	if len(vals) < 3 {
		return v, fmt.Errorf("q.lua: code %v without its %s: %v", vals[0], what, vals)
	}
	v, ok := vals[2].(T)
	if !ok {
		return v, fmt.Errorf("q.lua: bad %s %v", what, vals)
	}
	return v, nil
}
