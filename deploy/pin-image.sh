#!/usr/bin/env bash
# Moves an image's pin, or checks every pin against its registry.
#
#   deploy/pin-image.sh redis:8.10.3-alpine3.23   # pin this tag at its digest today
#   deploy/pin-image.sh --check                   # has any pinned tag moved since?
#
# A pin is name:tag@sha256:<digest>: people read the tag, the runtime pulls the digest.
# Pinning asks the registry for the tag's digest (its multi-platform index) and writes
# name:tag@digest wherever the deployment names that image: compose, the Kubernetes
# manifests (the generated Redis shards too), the shards' generator and the Dockerfile.
# --check lists the pins whose tag now names other content (upstream rebuilt it, most
# often for a base image's security fix); pin them again once you have read why.
# Needs docker with buildx (or DOCKER=<a compatible command>) and the registry reachable.
set -euo pipefail

ROOT="${FLASHSALE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
DOCKER="${DOCKER:-docker}"
cd "$ROOT"
FILES=(deploy/compose/compose.yaml deploy/k8s/*.yaml deploy/validate/k8sgen/k8sgen.go deploy/docker/Dockerfile)
for f in "${FILES[@]}"; do
	[[ -f "$f" ]] || { printf 'pin-image: %s is missing under %s\n' "$f" "$ROOT" >&2; exit 2; }
done

die() { printf 'pin-image: %s\n' "$*" >&2; exit 2; }

# digest_of REF: the registry's digest for REF (name:tag).
digest_of() {
	local out
	out="$("$DOCKER" buildx imagetools inspect "$1" --format '{{json .Manifest.Digest}}')" ||
		die "cannot resolve $1 (is the registry reachable, and the tag right?)"
	out="${out//\"/}"
	[[ "$out" =~ ^sha256:[0-9a-f]{64}$ ]] || die "$1: the registry answered '$out', not a sha256 digest"
	printf '%s' "$out"
}

# pinned_refs: every name:tag@sha256:... the files name, once each.
pinned_refs() {
	grep -ohE '[^[:space:]"=]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}' "${FILES[@]}" | sort -u
}

check() {
	local ref name_tag pinned now moved=0 n=0
	while read -r ref; do
		name_tag="${ref%@*}" pinned="${ref#*@}" n=$((n + 1))
		printf 'pin-image: checking %s (%d)\n' "$name_tag" "$n" >&2
		now="$(digest_of "$name_tag")"
		if [[ "$now" != "$pinned" ]]; then
			printf 'moved: %s is pinned at %s; the tag names %s today\n' "$name_tag" "$pinned" "$now"
			moved=$((moved + 1))
		fi
	done < <(pinned_refs)
	printf 'pin-image: %d pins checked, %d moved\n' "$n" "$moved" >&2
	[[ $moved -eq 0 ]]
}

pin() {
	local ref="$1" name tag digest
	[[ "$ref" != *@* ]] || die "give name:tag, not a digest: the digest is what this looks up"
	[[ "$ref" =~ ^([a-z0-9][a-z0-9._/-]*(:[0-9]+/[a-z0-9._/-]+)?):([A-Za-z0-9._-]+)$ ]] || die "'$ref' is not name:tag"
	name="${BASH_REMATCH[1]}" tag="${BASH_REMATCH[3]}"
	[[ "$tag" != latest ]] || die "latest is no version: give the release tag"
	digest="$(digest_of "$ref")"
	printf 'pin-image: %s is %s\n' "$ref" "$digest" >&2
	# Every reference to the image (name:tag, name:tag@digest or name@digest) becomes the
	# new pin; the bare name (a container called redis) and a longer name that ends in
	# this one (myregistry/redis) are left alone.
	local changed
	changed="$(grep -cE "(^|[[:space:]\"=])${name//./\\.}(:[A-Za-z0-9._-]+(@sha256:[0-9a-f]{64})?|@sha256:[0-9a-f]{64})([[:space:]\"]|$)" "${FILES[@]}" |
		awk -F: '{ n += $NF } END { print n + 0 }')"
	[[ "$changed" -gt 0 ]] || die "no file names the image $name"
	NAME="$name" NEW="$name:$tag@$digest" perl -i -pe '
		BEGIN { $n = quotemeta $ENV{NAME} }
		s{(^|[\s"=])$n(?::[A-Za-z0-9._-]+(?:\@sha256:[0-9a-f]{64})?|\@sha256:[0-9a-f]{64})(?=[\s"]|$)}{$1$ENV{NEW}}g' "${FILES[@]}"
	printf 'pin-image: %s lines now read %s:%s@%s; run make test (deploy/validate checks them)\n' "$changed" "$name" "$tag" "$digest" >&2
}

case "${1:-}" in
	--check) check ;;
	"" | -h | --help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; [[ -n "${1:-}" ]] ;;
	*) pin "$1" ;;
esac
