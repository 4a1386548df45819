// Package lua holds the Redis Lua scripts that mutate a promotion's qualification
// (grab, commit, return, and the admin scripts), embedded from the .lua files beside
// this one, with typed Go wrappers that build KEYS/ARGV and parse the replies.
// lua/README.md documents the Redis layout the scripts share.
package lua

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed q.lua
	qSrc string
	//go:embed commit.lua
	commitSrc string
	//go:embed ledgercommit.lua
	commitPrelude string
	//go:embed return.lua
	returnSrc string
	//go:embed create.lua
	createSrc string
	//go:embed patch.lua
	patchSrc string
	//go:embed stop.lua
	stopSrc string
	//go:embed delete.lua
	deleteSrc string
	//go:embed claimhold.lua
	claimHoldSrc string
	//go:embed reclaim.lua
	reclaimSrc string
	//go:embed holddue.lua
	holdDueSrc string
	//go:embed confirmhold.lua
	confirmHoldSrc string
	//go:embed state.lua
	statePrelude string
	//go:embed ended.lua
	endedSrc string
	//go:embed statedue.lua
	stateDueSrc string
	//go:embed bucketstate.lua
	bucketStateSrc string
)

var (
	// The scripts that may change a promotion's sale state share state.lua's
	// functions, and the two that commit takes ledgercommit.lua's: one
	// definition, prepended.
	qScript      = redis.NewScript(statePrelude + commitPrelude + qSrc)
	commitScript = redis.NewScript(commitPrelude + commitSrc)
	returnScript = redis.NewScript(statePrelude + returnSrc)
	createScript = redis.NewScript(createSrc)
	patchScript  = redis.NewScript(statePrelude + patchSrc)
	stopScript   = redis.NewScript(statePrelude + stopSrc)
	deleteScript = redis.NewScript(statePrelude + deleteSrc)
	endedScript  = redis.NewScript(statePrelude + endedSrc)
	// A bucket's BUCKET_EMPTY or BUCKET_FILLED, heard by bucket 0 (state.go).
	bucketStateScript = redis.NewScript(statePrelude + bucketStateSrc)
	// The state outbox's leases (state.go).
	stateDueScript = redis.NewScript(stateDueSrc)
	// The holds live on the request index shards (hold.go).
	claimHoldScript   = redis.NewScript(claimHoldSrc)
	holdDueScript     = redis.NewScript(holdDueSrc)
	confirmHoldScript = redis.NewScript(confirmHoldSrc)
	reclaimScript     = redis.NewScript(reclaimSrc)
)

// All returns every script of the package.
func All() []*redis.Script {
	return []*redis.Script{qScript, commitScript, returnScript, createScript, patchScript, stopScript, deleteScript,
		claimHoldScript, holdDueScript, confirmHoldScript, endedScript, stateDueScript, reclaimScript, bucketStateScript}
}

// Load sends SCRIPT LOAD for every script. Call it before pipelining: a pipeline only
// sends EVALSHA, which fails with NOSCRIPT on a server that has not seen the script.
// On a cluster client the load reaches every master.
func Load(ctx context.Context, c redis.Scripter) error {
	for _, s := range All() {
		if err := s.Load(ctx, c).Err(); err != nil {
			return fmt.Errorf("script load %s: %w", s.Hash(), err)
		}
	}
	return nil
}

// IsNoScript reports whether err is Redis's NOSCRIPT reply to EVALSHA
// (the server's script cache does not hold the script, e.g. after a restart).
func IsNoScript(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")
}

// errCmd is a Cmd that failed before it was sent (invalid call), so Parse* reports it.
func errCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}
