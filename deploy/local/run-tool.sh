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
