#!/usr/bin/env bash
# `make test`: every test CI runs, against a real local stack.
#   deps -> build -> vet, staticcheck -> govulncheck -> up -> go test (all workspace modules, -race) -> fuzz targets
#   -> stack-restart test -> down
# The stack is stopped whatever happens; the exit code is the first failing step's.
#
# FUZZ_TARGETS: space-separated "pkg:FuzzName" (e.g. ./internal/ring:FuzzShard), each run
# for FUZZTIME (go test -fuzztime: 20000x inputs; see the Makefile for why a count).
set -euo pipefail
# go.mod asks for go1.27.3; the go command fetches it from the module proxy.
export GOTOOLCHAIN=go1.27.3

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

FUZZ_TARGETS="${FUZZ_TARGETS:-}"
FUZZTIME="${FUZZTIME:-20000x}"
# Every module of go.work; in workspace mode one `go test` takes them all from the root.
GO_PKGS=(./... ./promo-admin/... ./grab-service/... ./recovery/... ./client/...)
# staticcheck, fetched by the go command from the module proxy at this version.
STATICCHECK="honnef.co/go/tools/cmd/staticcheck@v0.8.2"

step() { printf '\n==> %s\n' "$*" >&2; }

status=0
failed=() # the steps that failed, repeated after the stack is down: CI shows the end of the output
fail() {
	local rc="$1"
	shift
	printf '\n!!! %s failed (exit %d)\n' "$*" "$rc" >&2
	failed+=("$* (exit $rc)")
	((status)) || status="$rc"
}

# summary names every failed step, and the failing tests of the go test logs.
summary() {
	((${#failed[@]})) || return 0
	printf '\n==> FAILED:\n' >&2
	printf '  %s\n' "${failed[@]}" >&2
	if compgen -G ".run/logs/go-test*.log" >/dev/null; then
		grep -h -E -- '^(--- FAIL|FAIL|panic:)|^\s+\S+_test\.go:[0-9]+:' .run/logs/go-test*.log | head -n 40 >&2 || true
	fi
}

show_logs() {
	local f
	for f in .run/logs/*.log; do
		[[ -e "$f" && "$f" != *redis-* ]] || continue
		printf '\n--- last lines of %s\n' "$f" >&2
		tail -n 40 "$f" >&2
	done
}

stop_stack() {
	local rc=$?
	((status)) || status=$rc
	if ((status)) && [[ -d .run/logs ]]; then show_logs; fi
	step "down"
	deploy/local/stack.sh down || true
	summary
	exit "$status"
}
trap stop_stack EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "deps"
deploy/local/deps.sh --test

step "build"
deploy/build.sh

# Static analysis of every module, deploy/validate (outside go.work) included.
step "go vet and staticcheck ($STATICCHECK)"
{ go vet "${GO_PKGS[@]}" && (cd deploy/validate && GOWORK=off go vet ./...); } || fail $? "go vet"
{ go run "$STATICCHECK" "${GO_PKGS[@]}" && (cd deploy/validate && GOWORK=off go run "$STATICCHECK" ./...); } || fail $? "staticcheck"

# Known vulnerabilities reaching called code, every module (deploy/vulncheck.sh; the
# database is built offline from a pinned golang.org/x/vulndb and cached under ~/.cache).
step "govulncheck (every module)"
deploy/vulncheck.sh || fail $? "govulncheck"

step "deploy validation (compose, Kubernetes, Dockerfile, alerts, dashboard)"
deploy/validate/validate.sh || fail $? "deploy validation"

step "up"
STACK_BUILT=1 deploy/local/stack.sh up

# The go tests share the stack's redis-servers. The stack's own grab-service would
# settle the takes they leave open on purpose (its reconciler visits every
# promotion), so it is paused while they run; `stack.sh up` starts it again after.
step "pause the stack's grab-service for the go tests"
if [[ -s .run/pids/grab-service ]]; then
	kill "$(<.run/pids/grab-service)" 2>/dev/null || true
fi

step "go test (race) over ${GO_PKGS[*]}"
# TestClientOnLocalStack needs the stack's grab-service, paused here: it runs after.
go test -count=1 -race -timeout 20m -skip '^TestClientOnLocalStack$' "${GO_PKGS[@]}" 2>&1 | tee .run/logs/go-test.log || fail "${PIPESTATUS[0]}" "go test"

step "functional deadlines (switches in 1 s, the sink's resume in 3 s), measured alone (no race detector, one package at a time)"
FLASHSALE_STRICT_TIMING=1 go test -count=1 -p 1 -run 'Nacos|Switch|Configctl|SinkResumes' \
	./configcenter/... ./grab-service/internal/grabtransport/ ./recovery/internal/flowsink/ 2>&1 | tee .run/logs/go-test-strict.log ||
	fail "${PIPESTATUS[0]}" "strict deadlines"

for target in $FUZZ_TARGETS; do
	pkg="${target%%:*}"
	name="${target#*:}"
	step "fuzz $name in $pkg for $FUZZTIME"
	# go test -fuzz quietly passes when nothing matches; a renamed target must fail instead.
	listed="$(go test -list "^${name}\$" "$pkg" 2>&1)" || true
	if ! grep -qx "$name" <<<"$listed"; then
		printf '%s\n' "$listed" >&2
		fail 1 "fuzz $target: no fuzz test $name in $pkg"
		continue
	fi
	go test -count=1 -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" || fail $? "fuzz $target"
done

step "resume the stack's grab-service"
STACK_BUILT=1 deploy/local/stack.sh up >/dev/null || fail $? "stack up after the go tests"

step "the checkout client against the stack (client/)"
go test -count=1 -race -v -timeout 3m -run '^TestClientOnLocalStack$' ./client/ || fail $? "client against the stack"

step "fault drills, short suite (bin/drill --short)"
bin/drill --stack "$ROOT/.run/stack.json" --short || fail $? "fault drills"

step "make demo's sale, short (bin/demo: every section, its invariants checked)"
FLASHSALE_STACK_TEST=1 go test -count=1 -v -timeout 8m -run TestDemoRunsShort ./tools/demo/ || fail $? "demo"

step "alerts reach a receiver: Prometheus and Alertmanager over the committed rules (deploy/local/alerttest)"
FLASHSALE_ALERT_TEST=1 go test -count=1 -v -timeout 5m ./deploy/local/alerttest/ || fail $? "alert chain test"

step "events read by kcat, a client not in Go (deploy/local/kcattest)"
FLASHSALE_STACK_TEST=1 go test -count=1 -v -timeout 3m ./deploy/local/kcattest/ || fail $? "kcat events test"

# The sentinel drill needs a replica per shard and Redis Sentinel: the stack comes
# up again with them, for this drill alone (a master SIGKILLed at saturation must be
# promoted away and healed with no command; docs/drills.md).
step "failover at saturation under Redis Sentinel (FLASHSALE_REPLICAS=1, bin/drill --drills sentinel)"
if deploy/local/stack.sh down >/dev/null && FLASHSALE_REPLICAS=1 STACK_BUILT=1 deploy/local/stack.sh up; then
	FLASHSALE_REPLICAS=1 bin/drill --stack "$ROOT/.run/stack.json" --short --drills sentinel || fail $? "sentinel drill"
else
	fail $? "stack up with replicas and sentinels"
fi
deploy/local/stack.sh down >/dev/null || true

step "stack restart test"
FLASHSALE_STACK_TEST=1 go test -count=1 -v -timeout 15m ./deploy/local/stacktest/ || fail $? "stack restart test"

if ((status == 0)); then step "all tests passed"; fi
