package lua

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

func commitArgs(requestID string, keys []string) ([]string, error) {
	if requestID == "" {
		return nil, errors.New("commit: empty requestId")
	}
	k, err := itemKeys(keys)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", requestID, err)
	}
	return k, nil
}

// QueueCommit queues commit.lua for the promotions keys (hash keys, promo.Key) of
// one shard. EVALSHA only: Load the scripts first, and again after NOSCRIPT.
func QueueCommit(ctx context.Context, p redis.Pipeliner, requestID string, keys []string) *redis.Cmd {
	k, err := commitArgs(requestID, keys)
	if err != nil {
		return errCmd(ctx, err)
	}
	return commitScript.EvalSha(ctx, p, k, requestID)
}

// Commit marks the take of requestID committed (P -> G) on every promotion of keys.
func Commit(ctx context.Context, c redis.Scripter, requestID string, keys []string) (CommitCode, error) {
	k, err := commitArgs(requestID, keys)
	if err != nil {
		return 0, err
	}
	return ParseCommit(commitScript.Run(ctx, c, k, requestID))
}

// ParseCommit reads commit.lua's reply.
func ParseCommit(cmd *redis.Cmd) (CommitCode, error) {
	r, changes, err := replyParts(cmd, "commit.lua", 1)
	if err != nil {
		return 0, err
	}
	if len(changes) > 0 { // commit.lua changes no sale's state
		return 0, fmt.Errorf("commit.lua: unexpected state changes %v", changes)
	}
	switch c := CommitCode(r[0]); c {
	case CommitCommitted, CommitNotFound, CommitReturned:
		return c, nil
	}
	return 0, fmt.Errorf("commit.lua: unknown code %d", r[0])
}
