#!/usr/bin/env bash
# `make bench` / `make drill`: build, start the stack, run bin/<tool> --stack <file> [ARGS],
# stop the stack. Fails at once when the tool has not been written yet.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

tool="${1:?usage: run-tool.sh bench|drill}"
step() { printf '\n==> %s\n' "$*" >&2; }

step "deps"
deploy/local/deps.sh

step "build"
deploy/build.sh

if [[ ! -x "bin/$tool" ]]; then
	echo "bin/$tool is missing: no main package for it under tools/ yet, so there is nothing to run." >&2
	exit 1
fi

trap 'rc=$?; step "down"; deploy/local/stack.sh down || true; exit $rc' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "up"
STACK_BUILT=1 deploy/local/stack.sh up

step "$tool"
# shellcheck disable=SC2086 # ARGS is a plain word list from make
"bin/$tool" --stack "$ROOT/.run/stack.json" ${ARGS:-}

# make drill's full suite ends with the sentinel drill, three runs, on a stack with a
# replica per shard under Redis Sentinel (FLASHSALE_REPLICAS=1); a run that names its
# own drills (ARGS="--drills ...") leaves the stack as it is.
if [[ "$tool" == drill && " ${ARGS:-} " != *" --drills"* ]]; then
	step "down, and up with a replica per shard under Redis Sentinel"
	deploy/local/stack.sh down
	FLASHSALE_REPLICAS=1 STACK_BUILT=1 deploy/local/stack.sh up
	step "drill: the sentinel drill, three runs"
	# shellcheck disable=SC2086
	FLASHSALE_REPLICAS=1 "bin/$tool" --stack "$ROOT/.run/stack.json" --drills sentinel,sentinel,sentinel ${ARGS:-}
fi
