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

// Validate says what is wrong with the call, before it joins a batch that one
// malformed call would fail whole.
func (c CommitCall) Validate() error {
	_, err := commitArgs(c.RequestID, c.Keys)
	return err
}

// QueueCommits queues one commit.lua for a batch of requests on one shard, each
// decided alone (ParseCommits gives a code per call): one script call for what a
// pipeline of one call each did, at a fifth less of the shard's CPU per commit
// (BenchmarkShardCommit in grab-service).
func QueueCommits(ctx context.Context, p redis.Pipeliner, calls []CommitCall) *redis.Cmd {
	var keys []string
	args := make([]any, 0, 2*len(calls))
	for _, c := range calls {
		k, err := commitArgs(c.RequestID, c.Keys)
		if err != nil {
			return errCmd(ctx, err)
		}
		keys = append(keys, k...)
		args = append(args, c.RequestID, len(c.Keys))
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
