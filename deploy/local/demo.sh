#!/usr/bin/env bash
# `make demo`: from a fresh machine to a flash sale against the local stack, then down.
# The demo program itself is bin/demo (a main package under tools/); it gets the stack
# file as `--stack <path>` plus whatever ARGS holds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

step() { printf '\n==> %s\n' "$*" >&2; }

step "deps"
deploy/local/deps.sh

step "build"
deploy/build.sh

# From here on the stack goes down again whatever happens; the exit code is kept.
trap 'rc=$?; step "down"; deploy/local/stack.sh down || true; exit $rc' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "up"
STACK_BUILT=1 deploy/local/stack.sh up

step "demo"
# A build that left bin/demo out is a broken build, not a demo to skip.
[[ -x bin/demo ]] || { echo "demo: bin/demo is missing after the build (deploy/build.sh must build tools/demo)" >&2; exit 1; }
# shellcheck disable=SC2086 # ARGS is a plain word list from make
bin/demo --stack "$ROOT/.run/stack.json" ${ARGS:-}
