#!/usr/bin/env bash
# Validates everything under deploy/ that is not a script: the compose file, the
# Kubernetes manifests, the Dockerfile, the Prometheus configs and alert rules (with
# promtool's unit tests), the Grafana dashboard and provisioning, and the runbook's
# links to the alerts. `make test` runs it (deploy/local/test.sh); it needs no stack.
#
# Tools: promtool and prometheus come from Debian's `prometheus` package, unpacked (not
# installed: no daemon is started) once into $FLASHSALE_TOOLS_CACHE
# (~/.cache/flashsale-deploy). Everything else is Go, in this module (see doc.go).
set -euo pipefail
# go.mod asks for go1.27.3; the go command fetches it from the module proxy.
export GOTOOLCHAIN=go1.27.3

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${FLASHSALE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flashsale-deploy}"
PROM_DIR="$CACHE/prometheus"

log() { printf 'validate: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

SUDO=()
if ((EUID != 0)) && command -v sudo >/dev/null 2>&1; then SUDO=(sudo); fi

# promtool and prometheus: the machine's if present, else the unpacked Debian package.
find_prometheus() {
	if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
		PROMTOOL="$(command -v promtool)" PROMETHEUS="$(command -v prometheus)"
		return 0
	fi
	if [[ -x "$PROM_DIR/usr/bin/promtool" && -x "$PROM_DIR/usr/bin/prometheus" ]]; then
		PROMTOOL="$PROM_DIR/usr/bin/promtool" PROMETHEUS="$PROM_DIR/usr/bin/prometheus"
		return 0
	fi
	return 1
}

if ! find_prometheus; then
	command -v apt-get >/dev/null 2>&1 || die "promtool not found and no apt-get: install Prometheus (promtool) by hand"
	log "fetching Debian's prometheus package (promtool) into $PROM_DIR"
	if ! apt-cache show prometheus >/dev/null 2>&1; then
		"${SUDO[@]}" apt-get update -qq >&2
	fi
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt-get download -qq prometheus >&2)
	mkdir -p "$PROM_DIR"
	dpkg-deb -x "$tmp"/prometheus_*.deb "$PROM_DIR"
	find_prometheus || die "the prometheus package holds no promtool"
fi
log "$("$PROMTOOL" --version 2>&1 | head -n1)"

export PROMTOOL PROMETHEUS
export FLASHSALE_VALIDATE_STRICT=1 # a missing tool fails instead of skipping
cd "$HERE"
# A module of its own, outside go.work (doc.go says why).
export GOWORK=off
go vet ./...
go test -count=1 ./...
