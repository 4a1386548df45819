#!/usr/bin/env bash
# Makes this machine able to run the local stack, and does nothing when it already can:
#   - redis-server, MariaDB server and client, curl installed (apt, only if missing);
#   - with --test, also a C compiler (`go test -race` needs cgo), Chromium (the
#     promo-admin console's browser test drives /usr/bin/chromium headless), kcat (the
#     events test reads the topics with librdkafka) and the observe tools below;
#   - with --observe (and --test), Prometheus and Alertmanager for `make observe`:
#     Debian's prometheus and prometheus-alertmanager packages unpacked, not installed
#     (installing starts their daemons on :9090 and :9093), once into
#     $FLASHSALE_TOOLS_CACHE (~/.cache/flashsale-deploy, deploy/validate's cache too);
#   - MariaDB answering on 127.0.0.1:3306, its own user flashsale (password flashsale-local),
#     database `flashsale` present.
# The machine's own MariaDB (and any system redis on :6379) is left running for good:
# `make down` never stops them.
set -euo pipefail
# go.mod asks for go1.27.3; the go command fetches it from the module proxy.
export GOTOOLCHAIN=go1.27.3

MYSQL_HOST=127.0.0.1
MYSQL_PORT=3306
MYSQL_DB=flashsale
MYSQL_USER=flashsale
MYSQL_PASSWORD=flashsale-local # the local stack's (127.0.0.1 only); production's come from Secrets

log() { printf 'deps: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

with_test=0 with_observe=0
case "${1:-}" in
"") ;;
--test) with_test=1 with_observe=1 ;;
--observe) with_observe=1 ;;
*) die "usage: $0 [--test|--observe]" ;;
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
have redis-sentinel || missing+=(redis-sentinel) # FLASHSALE_REPLICAS=1, and the failover tests
sbin mariadbd mysqld >/dev/null || missing+=(mariadb-server)
have mariadb || have mysql || missing+=(mariadb-client)
have curl || missing+=(curl ca-certificates)
if ((with_test)); then
	have gcc || missing+=(gcc libc6-dev)
	[[ -x /usr/bin/chromium ]] || missing+=(chromium)
	have kcat || missing+=(kcat)
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

# ---- Prometheus and Alertmanager, unpacked ---------------------------------------------
TOOLS_CACHE="${FLASHSALE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flashsale-deploy}"
# unpack PACKAGE DIR BINARY: Debian's PACKAGE extracted into DIR unless DIR/usr/bin/BINARY runs.
unpack() {
	local pkg="$1" dir="$2" bin="$3" tmp
	[[ -x "$dir/usr/bin/$bin" ]] && return 0
	have apt-get || die "$pkg missing and no apt-get: unpack Debian's $pkg into $dir by hand"
	log "unpacking Debian's $pkg into $dir"
	apt-cache show "$pkg" >/dev/null 2>&1 || as_root apt-get update -qq >&2
	tmp="$(mktemp -d)"
	(cd "$tmp" && apt-get download -qq "$pkg" >&2 2>/dev/null) || { rm -rf "$tmp"; die "apt-get download $pkg failed"; }
	mkdir -p "$dir"
	dpkg-deb -x "$tmp/${pkg}_"*.deb "$dir"
	rm -rf "$tmp"
	[[ -x "$dir/usr/bin/$bin" ]] || die "Debian's $pkg holds no usr/bin/$bin"
}
if ((with_observe)); then
	unpack prometheus "$TOOLS_CACHE/prometheus" prometheus
	unpack prometheus-alertmanager "$TOOLS_CACHE/alertmanager" prometheus-alertmanager
	# Debian's Alertmanager loads its notification templates from this fixed folder (a
	# packaging patch), whoever unpacked it: put the package's copies there.
	am_tmpl=/usr/share/prometheus/alertmanager
	for f in "$TOOLS_CACHE/alertmanager$am_tmpl"/*.tmpl; do
		if ! cmp -s "$f" "$am_tmpl/${f##*/}"; then
			log "installing Alertmanager's template $am_tmpl/${f##*/}"
			as_root install -D -m 0644 "$f" "$am_tmpl/${f##*/}"
		fi
	done
	log "prometheus and alertmanager in $TOOLS_CACHE"
fi

have go || die "go not found in PATH: install Go 1.26 or newer (https://go.dev/dl/) into /usr/local/go and add /usr/local/go/bin to PATH; GOTOOLCHAIN=go1.27.3 fetches the release go.mod asks for"

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

# ---- the local stack's own MySQL user -----------------------------------------------
# The services log in as $MYSQL_USER over TCP, with a fixed development password (the
# local stack listens on 127.0.0.1 only), granted the stack's database and the scratch
# databases of the tests (t_*) and the bench (bench_*). root is left as the machine has it.
local_login() {
	MYSQL_PWD="$MYSQL_PASSWORD" "$CLIENT" --protocol=tcp -h"$MYSQL_HOST" -P"$MYSQL_PORT" -u"$MYSQL_USER" --connect-timeout=5 "$@"
}
if ! local_login -e "CREATE DATABASE IF NOT EXISTS \`$MYSQL_DB\`" >/dev/null 2>&1; then
	grants="
		CREATE USER IF NOT EXISTS '$MYSQL_USER'@'127.0.0.1' IDENTIFIED BY '$MYSQL_PASSWORD';
		CREATE USER IF NOT EXISTS '$MYSQL_USER'@'localhost' IDENTIFIED BY '$MYSQL_PASSWORD';
		GRANT ALL PRIVILEGES ON \`$MYSQL_DB\`.* TO '$MYSQL_USER'@'127.0.0.1', '$MYSQL_USER'@'localhost';
		GRANT ALL PRIVILEGES ON \`t\\_%\`.* TO '$MYSQL_USER'@'127.0.0.1', '$MYSQL_USER'@'localhost';
		GRANT ALL PRIVILEGES ON \`bench\\_%\`.* TO '$MYSQL_USER'@'127.0.0.1', '$MYSQL_USER'@'localhost';
		FLUSH PRIVILEGES;"
	log "creating MySQL user $MYSQL_USER for the local stack"
	# As MariaDB's root: through the unix socket as the OS root (Debian's default), or
	# over TCP where this machine already lets root in that way.
	as_root "$CLIENT" -uroot --protocol=socket -e "$grants" >&2 2>/dev/null || mysql_tcp -e "$grants" >&2 ||
		die "cannot log in to MariaDB as root to create $MYSQL_USER; create it by hand: $grants"
	local_login -e "CREATE DATABASE IF NOT EXISTS \`$MYSQL_DB\`" >/dev/null || die "$MYSQL_USER still cannot log in to $MYSQL_HOST:$MYSQL_PORT"
fi
log "database $MYSQL_DB ready ($MYSQL_USER@tcp($MYSQL_HOST:$MYSQL_PORT)/$MYSQL_DB)"
