#!/usr/bin/env bash
# Makes this machine able to run the local stack, and does nothing when it already can:
#   - redis-server, MariaDB server and client, curl installed (apt, only if missing);
#   - with --test, also a C compiler (`go test -race` needs cgo) and Chromium (the
#     promo-admin console's browser test drives /usr/bin/chromium headless);
#   - MariaDB answering on 127.0.0.1:3306, root@127.0.0.1 usable with an empty password,
#     database `flashsale` present.
# The machine's own MariaDB (and any system redis on :6379) is left running for good:
# `make down` never stops them.
set -euo pipefail

MYSQL_HOST=127.0.0.1
MYSQL_PORT=3306
MYSQL_DB=flashsale

log() { printf 'deps: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

with_test=0
case "${1:-}" in
"") ;;
--test) with_test=1 ;;
*) die "usage: $0 [--test]" ;;
esac

SUDO=()
if ((EUID != 0)); then
	command -v sudo >/dev/null 2>&1 || die "not root and no sudo: run as root or install sudo"
	SUDO=(sudo)
fi
as_root() { "${SUDO[@]}" "$@"; }

have() { command -v "$1" >/dev/null 2>&1; }
# Daemons live in /usr/sbin, which a normal user's PATH may lack.
sbin() {
	local n
	for n in "$@"; do
		if [[ -x "/usr/sbin/$n" ]]; then
			printf '/usr/sbin/%s\n' "$n"
			return 0
		fi
	done
	return 1
}

# ---- packages -------------------------------------------------------------------------
missing=()
have redis-server && have redis-cli || missing+=(redis-server)
sbin mariadbd mysqld >/dev/null || missing+=(mariadb-server)
have mariadb || have mysql || missing+=(mariadb-client)
have curl || missing+=(curl ca-certificates)
if ((with_test)); then
	have gcc || missing+=(gcc libc6-dev)
	[[ -x /usr/bin/chromium ]] || missing+=(chromium)
fi

if ((${#missing[@]})); then
	have apt-get || die "missing ${missing[*]} and no apt-get: install them by hand"
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	as_root apt-get update -qq >&2
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
		"${missing[@]}" >&2
else
	log "packages present"
fi

have go || die "go not found in PATH: install Go 1.26 (https://go.dev/dl/) into /usr/local/go and add /usr/local/go/bin to PATH"

# ---- MariaDB running ------------------------------------------------------------------
if have mariadb; then CLIENT=mariadb; else CLIENT=mysql; fi

# The server accepts TCP connections (it listens only once ready). `mysqladmin ping` is no
# good here: on a fresh install it fails with "Host '127.0.0.1' is not allowed to connect".
mysql_answers() {
	timeout 2 bash -c "exec 3<>/dev/tcp/$MYSQL_HOST/$MYSQL_PORT" 2>/dev/null
}
mysql_tcp() {
	"$CLIENT" --protocol=tcp -h"$MYSQL_HOST" -P"$MYSQL_PORT" -uroot --connect-timeout=5 "$@"
}

start_mariadb() {
	if [[ -d /run/systemd/system ]] && have systemctl; then
		log "starting MariaDB with systemctl"
		as_root systemctl start mariadb >&2
		return
	fi
	# No init system to ask (containers, CI): run the server ourselves, detached.
	local daemon datadir=/var/lib/mysql logdir=/var/log/mysql
	daemon="$(sbin mariadbd mysqld)" || die "no mariadbd/mysqld in /usr/sbin"
	# start-stop-daemon ships with dpkg; pgrep (procps) may be absent on a minimal system.
	if start-stop-daemon --status --exec "$daemon"; then
		log "MariaDB process exists but does not answer on $MYSQL_HOST:$MYSQL_PORT yet; waiting for it"
		return
	fi
	if ! as_root test -d "$datadir/mysql"; then
		log "initialising MariaDB data directory $datadir"
		local installdb
		if have mariadb-install-db; then installdb=mariadb-install-db; else installdb=mysql_install_db; fi
		as_root "$installdb" --user=mysql --datadir="$datadir" >&2
	fi
	as_root install -d -o mysql -g mysql /run/mysqld
	as_root install -d -o mysql -g mysql "$logdir"
	log "starting $daemon"
	as_root start-stop-daemon --start --oknodo --background --exec "$daemon" -- \
		--user=mysql --log-error="$logdir/error.log"
}

if ! mysql_answers; then
	start_mariadb
	printf 'deps: waiting for MariaDB on %s:%s ' "$MYSQL_HOST" "$MYSQL_PORT" >&2
	for ((i = 0; i < 60; i++)); do
		mysql_answers && break
		printf '.' >&2
		sleep 1
	done
	printf '\n' >&2
	mysql_answers || die "MariaDB does not answer on $MYSQL_HOST:$MYSQL_PORT after 60 s (see /var/log/mysql/error.log)"
fi
log "MariaDB answers on $MYSQL_HOST:$MYSQL_PORT"

# ---- root@127.0.0.1 without password --------------------------------------------------
if ! mysql_tcp -e 'SELECT 1' >/dev/null 2>&1; then
	# Debian's root@localhost logs in through the unix socket only; the services connect
	# over TCP, so give root@127.0.0.1 an empty password (a development machine only).
	log "granting root@$MYSQL_HOST an empty password (via the unix socket as OS root)"
	as_root "$CLIENT" -uroot --protocol=socket -e "
		CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
		GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
		FLUSH PRIVILEGES;" >&2 ||
		die "cannot log in to MariaDB as root through the unix socket; grant root@127.0.0.1 an empty password by hand"
	if ! mysql_tcp -e 'SELECT 1' >/dev/null 2>&1; then
		# The server matched the TCP login to root@localhost (127.0.0.1 resolved to localhost).
		log "also allowing root@localhost an empty password next to unix_socket"
		as_root "$CLIENT" -uroot --protocol=socket -e "
			ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
			FLUSH PRIVILEGES;" >&2
	fi
	mysql_tcp -e 'SELECT 1' >/dev/null || die "root@$MYSQL_HOST still cannot log in without a password"
fi

mysql_tcp -e "CREATE DATABASE IF NOT EXISTS \`$MYSQL_DB\`"
log "database $MYSQL_DB ready (root@tcp($MYSQL_HOST:$MYSQL_PORT)/$MYSQL_DB)"
