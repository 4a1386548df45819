package lua

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// ReturnMode says what a return.lua call does with each ledger entry (lua/README.md).
type ReturnMode string

const (
	// ReturnUndo gives back a take whose GRAB was never published: P entries return
	// their stock and leave the ledger, so the requestId may be grabbed afresh.
	// Refuses (COMMITTED) if an entry is G; missing entries are skipped.
	ReturnUndo ReturnMode = "undo"
	// ReturnAbort gives back a take whose GRAB may have been published: P -> A, stock
	// back, and a CANCEL (ROLLBACK) is owed. Refuses (COMMITTED) if an entry is G.
	ReturnAbort ReturnMode = "abort"
	// ReturnCancel is the buyer's cancel: G -> C, stock back, Reason stored, a CANCEL
	// is owed. The pin must be the one that took. Refuses (PENDING) if an entry is P.
	ReturnCancel ReturnMode = "cancel"
	// ReturnFinalize records that the owed CANCEL was acknowledged: A -> X, C -> R.
	ReturnFinalize ReturnMode = "finalize"
)

// valid reports whether m is one of the four modes.
func (m ReturnMode) valid() bool {
	switch m {
	case ReturnUndo, ReturnAbort, ReturnCancel, ReturnFinalize:
		return true
	}
	return false
}

// ReturnCall is one return.lua call on the ledger entries of RequestID in the
// promotions Keys (hash keys, promo.Key, all on one shard). Pin is checked only in
// ReturnCancel mode; Reason is stored by ReturnCancel (and by ReturnAbort when set).
type ReturnCall struct {
	RequestID, Pin string
	Mode           ReturnMode
	Reason         string
	NowMs          int64
	Keys           []string
	// Outbox is as GrabCall's.
	Outbox string
}

// ReturnReply is return.lua's answer; Returned counts the entries this call changed
// (stock returned, or for ReturnFinalize: entries finalized); Changes are the
// RESTOCKED changes it made, for the caller to publish (state.go). Envelopes,
// when the call gave back parts of an envelope pool, holds what each item gave
// back (the zero Envelope for the others).
type ReturnReply struct {
	Code      ReturnCode
	Returned  int
	Changes   []promo.StateChange
	Envelopes []Envelope
}

func (c ReturnCall) build() ([]string, []interface{}, error) {
	if c.RequestID == "" {
		return nil, nil, errors.New("return: empty requestId")
	}
	if !c.Mode.valid() {
		return nil, nil, fmt.Errorf("return %s: unknown mode %q", c.RequestID, string(c.Mode))
	}
	keys, err := itemKeysAndOutbox(c.Keys, c.Outbox)
	if err != nil {
		return nil, nil, fmt.Errorf("return %s: %w", c.RequestID, err)
	}
	return keys, []interface{}{c.RequestID, c.Pin, string(c.Mode), c.NowMs, c.Reason}, nil
}

// QueueReturn queues return.lua on a pipeline (EVALSHA only: Load the scripts first, and again after NOSCRIPT).
func QueueReturn(ctx context.Context, p redis.Pipeliner, c ReturnCall) *redis.Cmd {
	keys, args, err := c.build()
	if err != nil {
		return errCmd(ctx, err)
	}
	return returnScript.EvalSha(ctx, p, keys, args...)
}

// Return runs return.lua (EVALSHA, falling back to EVAL on NOSCRIPT).
func Return(ctx context.Context, c redis.Scripter, call ReturnCall) (ReturnReply, error) {
	keys, args, err := call.build()
	if err != nil {
		return ReturnReply{}, err
	}
	return ParseReturn(returnScript.Run(ctx, c, keys, args...))
}

// ParseReturn reads return.lua's reply.
func ParseReturn(cmd *redis.Cmd) (ReturnReply, error) {
	r, changes, envs, err := replyWithEnvelopes(cmd, "return.lua", 1)
	if err != nil {
		return ReturnReply{}, err
	}
	switch c := ReturnCode(r[0]); c {
	case ReturnReturned:
		if len(r) < 2 {
			return ReturnReply{}, fmt.Errorf("return.lua: RETURNED without count")
		}
		return ReturnReply{Code: c, Returned: int(r[1]), Changes: changes, Envelopes: envs}, nil
	case ReturnAlreadyReturned, ReturnNotFound, ReturnCommitted, ReturnPending:
		return ReturnReply{Code: c}, nil
	}
	return ReturnReply{}, fmt.Errorf("return.lua: unknown code %d", r[0])
}
