package lua

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Call is one script call built but not yet sent. Calls of the same script bound
// for one shard can share a single EVALSHA of the script's batch form
// (QueueCalls): under load one script invocation then carries many grabs or
// commits, and the per-call cost Redis pays for an EVALSHA (argument tables,
// script lookup, reply) is paid once per batch.
type Call struct {
	script *redis.Script
	keys   []string
	args   []any
	err    error // an invalid call: never sent, its Cmd carries the error
}

// GrabOf is q.lua's call for c (QueueCalls, then ParseGrab).
func GrabOf(c GrabCall) Call {
	keys, args, err := c.build()
	return Call{script: qScript, keys: keys, args: args, err: err}
}

// CommitOf is commit.lua's call for requestID on the promotions keys of one shard
// (QueueCalls, then ParseCommit).
func CommitOf(requestID string, keys []string) Call {
	k, err := commitArgs(requestID, keys)
	return Call{script: commitScript, keys: k, args: []any{requestID}, err: err}
}

// batchForms maps each script that has a batch form to it.
var batchForms = map[*redis.Script]*redis.Script{
	qScript:      redis.NewScript(batchForm(qSrc)),
	commitScript: redis.NewScript(batchForm(commitSrc)),
}

// batchForm wraps a script's source as a function run once per call of a batch.
// The calls run one after another inside one script, so each is exactly as atomic
// as alone, and none sees another half done. A call that raises an error (malformed
// arguments) answers that error alone: pcall keeps it from failing its neighbours.
//
// KEYS: every call's keys, call after call.
// ARGV: [1] c, the number of calls; [2j], [2j+1] the key and argument counts of
// call j (j = 1..c); then every call's arguments, call after call.
// Returns one reply per call, in order: the script's own reply, or an error reply.
func batchForm(src string) string {
	return "local function call(KEYS, ARGV)\n" + src + "\nend\n" + `
local c = tonumber(ARGV[1])
if not c or c < 1 or #ARGV < 2 * c + 1 then
  error('batch: want ARGV[1] calls and two counts per call')
end
local out = {}
local ki, ai = 1, 2 * c + 2
for j = 1, c do
  local nk, na = tonumber(ARGV[2 * j]), tonumber(ARGV[2 * j + 1])
  local keys, argv = {}, {}
  for x = 1, nk do
    keys[x] = KEYS[ki + x - 1]
  end
  for x = 1, na do
    argv[x] = ARGV[ai + x - 1]
  end
  ki, ai = ki + nk, ai + na
  local ok, res = pcall(call, keys, argv)
  if ok then
    out[j] = res
  elseif type(res) == 'table' and res.err then
    out[j] = {err = res.err}
  else
    out[j] = {err = tostring(res)}
  end
end
return out
`
}

// QueueCalls queues calls on p, every call of one script in a single EVALSHA of
// its batch form (a lone call as itself): the grabs first, then the commits, each
// in the order given. It returns each call's Cmd with split,
// which must run once p has been executed: it hands each call its own reply. All
// calls must be bound for the shard p talks to. EVALSHA only: Load the scripts
// first, and again after NOSCRIPT (then every call of the batch answers NOSCRIPT).
func QueueCalls(ctx context.Context, p redis.Pipeliner, calls []Call) (cmds []*redis.Cmd, split func()) {
	cmds = make([]*redis.Cmd, len(calls))
	var grabs, commits []int
	for i, c := range calls {
		switch {
		case c.err != nil:
			cmds[i] = errCmd(ctx, c.err)
		case c.script == qScript:
			grabs = append(grabs, i)
		default:
			commits = append(commits, i)
		}
	}
	var splits []func()
	for _, idx := range [][]int{grabs, commits} {
		if len(idx) == 0 {
			continue
		}
		script := calls[idx[0]].script
		if len(idx) == 1 {
			c := calls[idx[0]]
			cmds[idx[0]] = script.EvalSha(ctx, p, c.keys, c.args...)
			continue
		}
		batch := queueBatch(ctx, p, batchForms[script], calls, idx)
		splits = append(splits, func() { splitBatch(ctx, batch, cmds, idx) })
	}
	return cmds, func() {
		for _, s := range splits {
			s()
		}
	}
}

func queueBatch(ctx context.Context, p redis.Pipeliner, form *redis.Script, calls []Call, idx []int) *redis.Cmd {
	nk, na := 0, 0
	for _, i := range idx {
		nk += len(calls[i].keys)
		na += len(calls[i].args)
	}
	keys := make([]string, 0, nk)
	args := make([]any, 0, 1+2*len(idx)+na)
	args = append(args, len(idx))
	for _, i := range idx {
		keys = append(keys, calls[i].keys...)
		args = append(args, len(calls[i].keys), len(calls[i].args))
	}
	for _, i := range idx {
		args = append(args, calls[i].args...)
	}
	return form.EvalSha(ctx, p, keys, args...)
}

// splitBatch gives each call of a batch its own reply, or the batch's error.
func splitBatch(ctx context.Context, batch *redis.Cmd, cmds []*redis.Cmd, idx []int) {
	replies, err := batch.Slice()
	if err == nil && len(replies) != len(idx) {
		err = fmt.Errorf("batch: %d replies for %d calls", len(replies), len(idx))
	}
	for j, i := range idx {
		cmd := redis.NewCmd(ctx)
		switch {
		case err != nil:
			cmd.SetErr(err)
		default:
			if e, ok := replies[j].(error); ok {
				cmd.SetErr(e)
			} else {
				cmd.SetVal(replies[j])
			}
		}
		cmds[i] = cmd
	}
}

// batchScripts is every batch form, for Load.
func batchScripts() []*redis.Script {
	out := make([]*redis.Script, 0, len(batchForms))
	for _, s := range []*redis.Script{qScript, commitScript} {
		out = append(out, batchForms[s])
	}
	return out
}
