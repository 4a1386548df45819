package lua

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// commitArgs is commit.lua's KEYS and ARGV for calls: every call's item keys in
// order, and the pairs requestId, item count.
func commitArgs(calls []CommitCall) ([]string, []any, error) {
	var keys []string
	args := make([]any, 0, 2*len(calls))
	for _, c := range calls {
		if c.RequestID == "" {
			return nil, nil, errors.New("commit: empty requestId")
		}
		k, err := itemKeys(c.Keys)
		if err != nil {
			return nil, nil, fmt.Errorf("commit %s: %w", c.RequestID, err)
		}
		keys = append(keys, k...)
		args = append(args, c.RequestID, len(c.Keys))
	}
	return keys, args, nil
}

// QueueCommit queues commit.lua for the promotions keys (hash keys, promo.Key) of
// one shard. EVALSHA only: Load the scripts first, and again after NOSCRIPT.
func QueueCommit(ctx context.Context, p redis.Pipeliner, requestID string, keys []string) *redis.Cmd {
	return QueueCommits(ctx, p, []CommitCall{{RequestID: requestID, Keys: keys}})
}

// Commit marks the take of requestID committed (P -> G) on every promotion of keys.
func Commit(ctx context.Context, c redis.Scripter, requestID string, keys []string) (CommitCode, error) {
	k, args, err := commitArgs([]CommitCall{{RequestID: requestID, Keys: keys}})
	if err != nil {
		return 0, err
	}
	return ParseCommit(commitScript.Run(ctx, c, k, args...))
}

// ParseCommit reads commit.lua's reply to one request.
func ParseCommit(cmd *redis.Cmd) (CommitCode, error) {
	codes, err := ParseCommits(cmd, 1)
	if err != nil {
		return 0, err
	}
	return codes[0], nil
}

// CommitCall is one request's part of a batch commit: its requestId and the
// promotion keys (promo.Key) of its items on the shard.
type CommitCall struct {
	RequestID string
	Keys      []string
}

// QueueCommits queues one commit.lua for a batch of requests on one shard, each
// decided alone (ParseCommits gives a code per call): one script call for what a
// pipeline of one call each did, at a fifth less of the shard's CPU per commit
// (BenchmarkShardCommit in grab-service). A malformed call fails the whole batch.
func QueueCommits(ctx context.Context, p redis.Pipeliner, calls []CommitCall) *redis.Cmd {
	keys, args, err := commitArgs(calls)
	if err != nil {
		return errCmd(ctx, err)
	}
	return commitScript.EvalSha(ctx, p, keys, args...)
}

// ParseCommits reads commit.lua's reply to n requests: a code for each, in order.
func ParseCommits(cmd *redis.Cmd, n int) ([]CommitCode, error) {
	r, changes, err := replyParts(cmd, "commit.lua", n)
	if err != nil {
		return nil, err
	}
	if len(changes) > 0 || len(r) != n { // commit.lua changes no sale's state
		return nil, fmt.Errorf("commit.lua: %d codes and state changes %v, want %d codes", len(r), changes, n)
	}
	codes := make([]CommitCode, n)
	for i, v := range r {
		switch c := CommitCode(v); c {
		case CommitCommitted, CommitNotFound, CommitReturned:
			codes[i] = c
		default:
			return nil, fmt.Errorf("commit.lua: unknown code %d", v)
		}
	}
	return codes, nil
}
