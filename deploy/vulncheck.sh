#!/usr/bin/env bash
# `make vulncheck` and a step of `make test`: govulncheck over every module, against a
# vulnerability database built here from the OSV entries of the golang.org/x/vulndb
# module (the Go module proxy serves it; the database service need not be reachable).
# Fails on a vulnerability in code the modules call, unless tools/vulndb/accepted.txt
# accepts it with a reason; one only in imported or required code is listed, not
# failed on.
#
# VULNDB_VERSION pins the database: to refresh it, set it to the newest pseudo-version
# (`go list -m golang.org/x/vulndb@latest` names it). govulncheck's version is pinned
# by the tool directive of tools/vulndb/go.mod. Both are built once into VULNCHECK_CACHE
# (default ~/.cache/flashsale/vulncheck), keyed by version.
set -euo pipefail
# go.mod asks for go1.27.3; the go command fetches it from the module proxy.
export GOTOOLCHAIN=go1.27.3

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VULNDB_VERSION="${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}"
CACHE="${VULNCHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flashsale/vulncheck}"
TOOLS="$ROOT/tools/vulndb" # its own module, outside go.work: GOWORK=off to build from it

note() { printf 'vulncheck: %s\n' "$*" >&2; }

DB="$CACHE/db-$VULNDB_VERSION"
if [[ -e "$DB/index/db.json" ]]; then
	note "database golang.org/x/vulndb@$VULNDB_VERSION (cached in $DB)"
else
	note "downloading golang.org/x/vulndb@$VULNDB_VERSION from the module proxy"
	dir="$(go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	if [[ ! -d "$dir/data/osv" ]]; then
		note "golang.org/x/vulndb@$VULNDB_VERSION has no data/osv (dir: ${dir:-none})"
		exit 1
	fi
	note "building the database into $DB"
	mkdir -p "$CACHE"
	(cd "$TOOLS" && GOWORK=off go run . -osv "$dir/data/osv" -out "$DB")
fi

# One binary per govulncheck version, so a run does not rebuild it; the reader of its
# findings (tools/vulndb/findings) is built each run, from the build cache.
gv_version="$(cd "$TOOLS" && GOWORK=off go list -m -f '{{.Version}}' golang.org/x/vuln)"
GOVULNCHECK="$CACHE/bin/govulncheck-$gv_version"
if [[ ! -x "$GOVULNCHECK" ]]; then
	note "building govulncheck $gv_version"
	(cd "$TOOLS" && GOWORK=off go build -o "$GOVULNCHECK.tmp" golang.org/x/vuln/cmd/govulncheck)
	mv "$GOVULNCHECK.tmp" "$GOVULNCHECK"
fi
FINDINGS="$CACHE/bin/findings"
(cd "$TOOLS" && GOWORK=off go build -o "$FINDINGS" ./findings)

status=0
# scan LABEL DIR ENV...: govulncheck over DIR/... (JSON), judged by findings against
# tools/vulndb/accepted.txt: exit 3 on a vulnerability in called code not accepted
# there, 1 if govulncheck itself fails (a package that does not load).
scan() {
	local label="$1" dir="$2" rc=0
	shift 2
	note "scanning $label"
	(cd "$dir" && "$@" "$GOVULNCHECK" -db "file://$DB" -format json ./... |
		"$FINDINGS" -label "$label" -accept "$TOOLS/accepted.txt") || rc=$?
	if ((rc)); then
		note "$label: exit $rc"
		((status)) || status=$rc
	fi
}

# The workspace's modules, each in workspace mode: the versions go.work selects are
# the ones the binaries are built with.
for mod in . client grab-service promo-admin recovery; do
	scan "$mod (go.work)" "$ROOT/$mod" env
done
scan "deploy/validate (GOWORK=off)" "$ROOT/deploy/validate" env GOWORK=off
scan "tools/vulndb (GOWORK=off)" "$TOOLS" env GOWORK=off

if ((status)); then
	note "FAILED: a vulnerability reaches called code (above); upgrade the module that fixes it"
else
	note "ok: no vulnerability in called code but those accepted (tools/vulndb/accepted.txt)"
fi
exit "$status"
