#!/bin/sh
# nacos-init.sh BASE SWITCHES: sets up the users of a Nacos with auth on and publishes
# the switches document once. BASE is Nacos' URL (http://nacos:8848/nacos), SWITCHES the
# seed document. Environment: NACOS_ADMIN_PASSWORD (user nacos), NACOS_PASSWORD (user
# flashsale: the services, read only), NACOS_CONFIGCTL_PASSWORD (user configctl:
# on-call, read and write) and NACOS_PROMO_ADMIN_PASSWORD (user promo-admin: publishes
# on-call's changes, PUT /v1/switches, read and write). Idempotent: an existing admin, user, role or document is
# left as it is, so a rerun never undoes an on-call change or a rotated password.
# Passwords and the access token reach curl on stdin or in files, never in its argv.
# Used by compose (nacos-init) and Kubernetes (Job nacos-seed).
set -eu
base="$1"
switches="$2"
umask 077
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Nacos 2.4 starts without an admin password: the first call sets it; later calls
# answer that the admin exists, which is fine.
printf %s "$NACOS_ADMIN_PASSWORD" | curl -s -o /dev/null -X POST "$base/v1/auth/users/admin" --data-urlencode password@- || true

printf %s "$NACOS_ADMIN_PASSWORD" | curl -sf -X POST "$base/v1/auth/login" \
	--data-urlencode username=nacos --data-urlencode password@- >"$tmp/login"
sed -n 's/.*"accessToken":"\([^"]*\)".*/\1/p' "$tmp/login" | tr -d '\n' >"$tmp/token"
if [ ! -s "$tmp/token" ]; then
	echo >&2 "nacos-init: login as nacos gave no accessToken (is NACOS_ADMIN_PASSWORD the admin's?)"
	exit 1
fi

# user NAME PASSWORD ROLE ACTION: the user, its role, and the role's permission on every
# namespace's configuration (r or rw). Nacos refuses duplicates; those answers are ignored.
user() {
	printf %s "$2" | curl -s -o /dev/null -X POST "$base/v1/auth/users" --data-urlencode accessToken@"$tmp/token" \
		--data-urlencode "username=$1" --data-urlencode password@- || true
	curl -s -o /dev/null -X POST "$base/v1/auth/roles" --data-urlencode accessToken@"$tmp/token" \
		--data-urlencode "role=$3" --data-urlencode "username=$1" || true
	curl -s -o /dev/null -X POST "$base/v1/auth/permissions" --data-urlencode accessToken@"$tmp/token" \
		--data-urlencode "role=$3" --data-urlencode 'resource=*:*:*' --data-urlencode "action=$4" || true
}
user flashsale "$NACOS_PASSWORD" flashsale-reader r
user configctl "$NACOS_CONFIGCTL_PASSWORD" flashsale-operator rw
user promo-admin "$NACOS_PROMO_ADMIN_PASSWORD" flashsale-publisher rw

url="$base/v1/cs/configs"
if curl -sf -G "$url" --data-urlencode accessToken@"$tmp/token" \
	--data-urlencode dataId=flashsale-switches --data-urlencode group=FLASHSALE >/dev/null; then
	echo "flashsale-switches exists; left as is"
else
	curl -sf -X POST "$url" --data-urlencode accessToken@"$tmp/token" --data-urlencode dataId=flashsale-switches \
		--data-urlencode group=FLASHSALE --data-urlencode type=json \
		--data-urlencode content@"$switches"
	echo "flashsale-switches published"
fi
