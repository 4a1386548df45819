#!/usr/bin/env bash
# Builds every binary of the workspace into bin/ with -trimpath.
#
# Each module is built from its own directory (workspace mode, go.work at the root), so
# `go build -o bin/ <pkgs>` names every binary after its package directory. A main package
# that does not exist (yet) is skipped with a note; a package that fails to compile fails
# the script.
set -euo pipefail
# go.mod asks for go1.27.3; the go command fetches it from the module proxy.
export GOTOOLCHAIN=go1.27.3

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/bin"
mkdir -p "$BIN"

note() { printf 'build: %s\n' "$*" >&2; }

# is_main DIR: DIR holds a non-test Go file declaring package main.
is_main() {
	local f
	for f in "$1"/*.go; do
		[[ -e "$f" && "$f" != *_test.go ]] || continue
		if grep -qE '^package[[:space:]]+main([[:space:]]|$)' "$f"; then
			return 0
		fi
	done
	return 1
}

# first_main LABEL CANDIDATE...: prints the first candidate directory (relative to the
# module) that is a main package, or notes that LABEL is missing.
first_main() {
	local label="$1" mod="$2" c
	shift 2
	for c in "$@"; do
		if is_main "$ROOT/$mod/$c"; then
			printf '%s\n' "$c"
			return 0
		fi
	done
	note "skip $label: no main package in $mod/{$(IFS=,; echo "$*")} yet"
	return 0
}

# build_module MOD PKG...: one `go build` for the module's main packages.
build_module() {
	local mod="$1"
	shift
	if (($# == 0)); then
		return 0
	fi
	note "$mod: $*"
	(cd "$ROOT/$mod" && go build -trimpath -o "$BIN/" "$@")
}

# Root module: the local Kafka broker, cmd/* and every main package under tools/.
root_pkgs=(./deploy/local/kafka-broker)
# The on-call tool lives beside its package: configcenter/cmd/configctl -> bin/configctl.
is_main "$ROOT/configcenter/cmd/configctl" && root_pkgs+=(./configcenter/cmd/configctl)
for d in "$ROOT"/cmd/*/ ; do
	[[ -d "$d" ]] && is_main "$d" && root_pkgs+=("./${d#"$ROOT"/}")
done
if [[ -d "$ROOT/tools" ]]; then
	while IFS= read -r d; do
		rel="${d#"$ROOT"/}"
		# A directory with its own go.mod, and all below it, is a separate module
		# outside go.work.
		if [[ -e "$d/go.mod" ]]; then
			note "skip $rel: separate module, not in go.work"
			outside="$rel"
			continue
		fi
		if [[ -n "${outside:-}" && "$rel/" == "$outside"/* ]]; then
			continue
		fi
		is_main "$d" && root_pkgs+=("./$rel")
	done < <(find "$ROOT/tools" -type d -not -path '*/testdata*' | sort)
fi
build_module . "${root_pkgs[@]%/}"

# Service modules: ./<mod>/cmd/<mod> if it exists, else the module root, plus any other
# main packages under the module's cmd/.
for mod in promo-admin grab-service recovery; do
	pkgs=()
	main_pkg="$(first_main "$mod" "$mod" "cmd/$mod" ".")"
	case "$main_pkg" in
	"") ;;
	.) pkgs+=(.) ;;
	*) pkgs+=("./$main_pkg") ;;
	esac
	for d in "$ROOT/$mod"/cmd/*/ ; do
		[[ -d "$d" ]] || continue
		rel="cmd/$(basename "$d")"
		[[ "$rel" == "cmd/$mod" ]] && continue
		is_main "$d" && pkgs+=("./$rel")
	done
	build_module "$mod" "${pkgs[@]}"
done

note "done: $(cd "$BIN" && ls | tr '\n' ' ')"
