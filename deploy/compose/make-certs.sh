#!/bin/sh
# make-certs.sh [--force] [DIR]: the compose stack's TLS material (deploy/RUNBOOK.md,
# "Compose" and "TLS inside"): a private CA and one server certificate per backend,
# signed by it, for the names the compose services dial. DIR defaults to
# deploy/compose/tls (in .gitignore: never commit it).
#
#   DIR/ca.key, ca.crt          the CA; ca.key is mounted nowhere (keep it offline)
#   DIR/ca/ca.crt               what every client trusts (services, exporters, jobs)
#   DIR/redis/                  tls.crt, tls.key, ca.crt: masters, replicas, sentinels
#   DIR/mysql/                  tls.crt, tls.key, ca.crt
#   DIR/nacos/                  tls.crt, tls.key, ca.crt
#   DIR/kafka/                  tls.crt, tls.key, keystore.p12, keystore.password, ca.crt
#   DIR/public.pem              HAProxy's certificate then key (localhost, for a trial)
#
# Idempotent: a key that exists is kept, and with it its certificate; --force makes
# every key and certificate again (then restart the stack: deploy/RUNBOOK.md). Each
# file written is named on stdout. TLS_DAYS (825) and TLS_BITS (3072, RSA) change the
# certificates' life and key size.
#
# Who reads what: each backend's directory is bind-mounted into its containers alone,
# whose users differ (redis 999:1000, mysqld 999:999, kafka 1000, nacos root), so the
# files in it are 0644 and the directories 0755, while DIR itself is 0700: on the host
# only its owner reaches the keys. Run as root, the script instead gives each key to its
# container's user, mode 0400 (0440 for Redis' group).
set -eu

force=0
if [ "${1:-}" = "--force" ]; then
	force=1
	shift
fi
case "${1:-}" in -*)
	echo >&2 "usage: $0 [--force] [DIR]"
	exit 2
	;;
esac
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$here/tls}"
days="${TLS_DAYS:-825}"
bits="${TLS_BITS:-3072}"
command -v openssl >/dev/null || {
	echo >&2 "make-certs.sh: openssl not found"
	exit 1
}

umask 077
mkdir -p "$dir"
chmod 700 "$dir"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

wrote() { echo "wrote $1"; }
kept() { echo "kept  $1 (exists; --force to make it again)"; }

# The CA: made once; --force makes a new one (every certificate is then issued again).
ca() {
	if [ "$force" = 0 ] && [ -s "$dir/ca.key" ] && [ -s "$dir/ca.crt" ]; then
		kept "$dir/ca.key"
		return
	fi
	openssl req -x509 -newkey rsa:"$bits" -nodes -days "$days" -subj /CN=flashsale-compose-ca \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
		-keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
	chmod 600 "$dir/ca.key"
	chmod 644 "$dir/ca.crt"
	wrote "$dir/ca.key"
	wrote "$dir/ca.crt"
	force=1 # a new CA: the server certificates must be issued by it
}

# issue NAME SANS: DIR/NAME/tls.key and tls.crt (PKCS#8 key, as Nacos' gRPC side
# needs), serverAuth, for the comma-separated subjectAltName SANS.
issue() {
	out="$dir/$1"
	mkdir -p "$out"
	chmod 755 "$out"
	if [ "$force" = 0 ] && [ -s "$out/tls.key" ] && [ -s "$out/tls.crt" ]; then
		kept "$out/tls.key"
		return 1
	fi
	openssl req -newkey rsa:"$bits" -nodes -subj "/CN=$1" -keyout "$out/tls.key" -out "$work/$1.csr" 2>/dev/null
	printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\nbasicConstraints=CA:FALSE\n' "$2" >"$work/$1.ext"
	openssl x509 -req -in "$work/$1.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
		-days "$days" -extfile "$work/$1.ext" -out "$out/tls.crt" 2>/dev/null
	chmod 644 "$out/tls.crt"
	wrote "$out/tls.key"
	wrote "$out/tls.crt"
}

# share NAME: the CA beside NAME's key (the servers that check their peers read it).
share() {
	cp "$dir/ca.crt" "$dir/$1/ca.crt"
	chmod 644 "$dir/$1/ca.crt"
}

# own NAME UID:GID MODE: who may read NAME's key and keystore in its containers.
own() {
	for f in "$dir/$1/tls.key" "$dir/$1/keystore.p12" "$dir/$1/keystore.password"; do
		[ -f "$f" ] || continue
		if [ "$(id -u)" = 0 ]; then
			chown "$2" "$f"
			chmod "$3" "$f"
		else
			chmod 644 "$f"
		fi
	done
}

redis_sans() {
	san="DNS:localhost,IP:127.0.0.1"
	n=0
	while [ "$n" -lt 16 ]; do
		san="$san,DNS:redis-master-$n,DNS:redis-replica-$n"
		n=$((n + 1))
	done
	for s in 1 2 3; do san="$san,DNS:redis-sentinel-$s"; done
	echo "$san"
}

ca
issue redis "$(redis_sans)" || true
issue mysql "DNS:mysql,DNS:localhost,IP:127.0.0.1" || true
issue nacos "DNS:nacos,DNS:localhost,IP:127.0.0.1" || true
if issue kafka "DNS:kafka-1,DNS:kafka-2,DNS:kafka-3,DNS:localhost,IP:127.0.0.1" || [ ! -s "$dir/kafka/keystore.p12" ]; then
	# The brokers' PKCS12 keystore; its password is random, in the file beside it,
	# which the brokers' start script reads.
	[ -s "$dir/kafka/keystore.password" ] || {
		openssl rand -hex 24 >"$dir/kafka/keystore.password"
		wrote "$dir/kafka/keystore.password"
	}
	openssl pkcs12 -export -in "$dir/kafka/tls.crt" -inkey "$dir/kafka/tls.key" -certfile "$dir/ca.crt" \
		-name kafka -out "$dir/kafka/keystore.p12" -passout "file:$dir/kafka/keystore.password"
	wrote "$dir/kafka/keystore.p12"
fi
for s in redis mysql nacos kafka ca; do
	mkdir -p "$dir/$s"
	chmod 755 "$dir/$s"
	share "$s"
done
own redis 999:1000 440
own mysql 999:999 400
own nacos 0:0 400
own kafka 1000:1000 400

# HAProxy's public certificate: only when there is none (production: your own).
if [ "$force" = 1 ] || [ ! -s "$dir/public.pem" ]; then
	if [ -s "$dir/public.pem" ] && [ ! -s "$dir/public/tls.key" ]; then
		kept "$dir/public.pem (not made here)"
	else
		issue public "DNS:localhost,IP:127.0.0.1" || true
		cat "$dir/public/tls.crt" "$dir/public/tls.key" >"$dir/public.pem"
		chmod 644 "$dir/public.pem"
		wrote "$dir/public.pem"
	fi
else
	kept "$dir/public.pem"
fi
