#!/usr/bin/env bash
# The local stack: 16 redis shards, a Kafka-protocol broker and the services, all in the
# background, all state under .run/ (git-ignored).
#
#   stack.sh up      start whatever is not running (running parts are left alone), write
#                    .run/stack.json, return once every service answers /readyz
#   stack.sh down    stop everything `up` started (never the machine's MariaDB or the
#                    system redis on :6379)
#   stack.sh status  one line per component
#
# FLASHSALE_REPLICAS=1 gives each shard a replica (port +100) and runs three Redis
# Sentinels (FLASHSALE_SENTINEL_BASE_PORT, 26379..26381) watching the 16 masters as
# shard-0..shard-15: a killed master is promoted away, the services follow the
# sentinels, and the flow sink's healer rebuilds the promoted replica from the record.
#
# Environment: FLASHSALE_REDIS_BASE_PORT (7001), FLASHSALE_KAFKA_ADDR (127.0.0.1:9092),
# FLASHSALE_GRAB_ADDR (127.0.0.1:8080), FLASHSALE_ADMIN_ADDR (127.0.0.1:8081),
# FLASHSALE_SINK_ADDR (127.0.0.1:8082), FLASHSALE_{GRAB,ADMIN,SINK}_OPS_ADDR (127.0.0.1:9180..9182:
# the ops listeners, /metrics and pprof), FLASHSALE_MYSQL_DSN (flashsale:flashsale-local@tcp(127.0.0.1:3306)/flashsale?..., deps.sh's user),
# FLASHSALE_REQUIRE_APPROVAL (0; 1 or true runs promo-admin with --require-approval: creates and
# changes wait for an approver, token dev-approver-token; the demo and the tests want it off);
# every other variable reaches the services as is.
#
# "Running" means: the pid in .run/pids/<name> is alive, is the program we started, and
# its port answers (redis PING, a TCP connect to Kafka, HTTP 200 on a service's /readyz).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$ROOT/bin"
RUN="$ROOT/.run"
LOGS="$RUN/logs"
PIDS="$RUN/pids"
STACK_FILE="$RUN/stack.json"
SWITCHES_FILE="$RUN/switches.json"

# Addresses follow docs/CONTRACT.md; the FLASHSALE_* variables move them when the machine's
# ports are taken (everything that talks to the stack reads .run/stack.json).
SHARDS=16
REDIS_HOST=127.0.0.1
REDIS_BASE_PORT="${FLASHSALE_REDIS_BASE_PORT:-7001}" # logical shard i listens on REDIS_BASE_PORT+i
KAFKA_ADDR="${FLASHSALE_KAFKA_ADDR:-127.0.0.1:9092}"
GRAB_ADDR="${FLASHSALE_GRAB_ADDR:-127.0.0.1:8080}"
ADMIN_ADDR="${FLASHSALE_ADMIN_ADDR:-127.0.0.1:8081}"
SINK_ADDR="${FLASHSALE_SINK_ADDR:-127.0.0.1:8082}"
# Each service's ops listener (/metrics, the probes, pprof): apart from its API.
GRAB_OPS_ADDR="${FLASHSALE_GRAB_OPS_ADDR:-127.0.0.1:9180}"
ADMIN_OPS_ADDR="${FLASHSALE_ADMIN_OPS_ADDR:-127.0.0.1:9181}"
SINK_OPS_ADDR="${FLASHSALE_SINK_OPS_ADDR:-127.0.0.1:9182}"
MYSQL_DSN="${FLASHSALE_MYSQL_DSN:-flashsale:flashsale-local@tcp(127.0.0.1:3306)/flashsale?parseTime=true}"
# promo-admin's approval (docs/CONTRACT.md, "Approval"): off unless asked for.
REQUIRE_APPROVAL="${FLASHSALE_REQUIRE_APPROVAL:-0}"

# Replicas and sentinels (FLASHSALE_REPLICAS=1): deploy/RUNBOOK.md, "A lost Redis master".
REPLICAS="${FLASHSALE_REPLICAS:-0}"
REPLICA_OFFSET=100
SENTINELS=3
SENTINEL_BASE_PORT="${FLASHSALE_SENTINEL_BASE_PORT:-26379}"
SENTINEL_PREFIX=shard-
# A master is down after 1 s without an answer; two of three sentinels must agree.
SENTINEL_DOWN_AFTER_MS=1000
SENTINEL_QUORUM=2

REDIS_READY_SECS=15
KAFKA_READY_SECS=30
SERVICE_READY_SECS=60
STOP_GRACE_SECS=10

SERVICES=(grab-service promo-admin flow-sink)

log() { printf 'stack: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---- component table ------------------------------------------------------------------

redis_port() { echo $((REDIS_BASE_PORT + ${1#redis-})); }
replica_port() { echo $((REDIS_BASE_PORT + REPLICA_OFFSET + ${1#replica-})); }
sentinel_port() { echo $((SENTINEL_BASE_PORT + ${1#sentinel-})); }
replicas_on() { [[ "$REPLICAS" == 1 ]]; }

replica_names() { local i; for ((i = 0; i < SHARDS; i++)); do echo "replica-$i"; done; }
sentinel_names() { local i; for ((i = 0; i < SENTINELS; i++)); do echo "sentinel-$i"; done; }

all_components() {
	local i
	for ((i = 0; i < SHARDS; i++)); do echo "redis-$i"; done
	if replicas_on; then
		replica_names
		sentinel_names
	fi
	echo kafka
	printf '%s\n' "${SERVICES[@]}"
}

# addr NAME: where the component listens.
addr() {
	case "$1" in
	redis-*) echo "$REDIS_HOST:$(redis_port "$1")" ;;
	replica-*) echo "$REDIS_HOST:$(replica_port "$1")" ;;
	sentinel-*) echo "$REDIS_HOST:$(sentinel_port "$1")" ;;
	kafka) echo "$KAFKA_ADDR" ;;
	grab-service) echo "$GRAB_ADDR" ;;
	promo-admin) echo "$ADMIN_ADDR" ;;
	flow-sink) echo "$SINK_ADDR" ;;
	esac
}

# ops_addr NAME: where a service's ops listener is.
ops_addr() {
	case "$1" in
	grab-service) echo "$GRAB_OPS_ADDR" ;;
	promo-admin) echo "$ADMIN_OPS_ADDR" ;;
	flow-sink) echo "$SINK_OPS_ADDR" ;;
	esac
}

# signature NAME: a string the process's command line must contain. It guards against a
# recycled pid: a pid file may outlive its process, and the pid may now be someone else's.
signature() {
	case "$1" in
	redis-* | replica-*) echo "redis-server" ;;
	sentinel-*) echo "redis-sentinel" ;;
	kafka) echo "$BIN/kafka-broker" ;;
	grab-service) echo "$BIN/grab-service" ;;
	promo-admin) echo "$BIN/promo-admin" ;;
	flow-sink) echo "$BIN/recovery sink" ;;
	esac
}

# approval_on: FLASHSALE_REQUIRE_APPROVAL asks for promo-admin's approval (1 or true).
approval_on() { [[ "${REQUIRE_APPROVAL,,}" == 1 || "${REQUIRE_APPROVAL,,}" == true ]]; }

# service_cmd NAME: the command line of a service (flags every service accepts).
service_cmd() {
	local redis_addrs
	redis_addrs="$(redis_list ,)"
	case "$1" in
	grab-service) printf '%s\0' "$BIN/grab-service" ;;
	promo-admin) printf '%s\0' "$BIN/promo-admin" ;;
	flow-sink) printf '%s\0' "$BIN/recovery" sink ;;
	esac
	printf '%s\0' --local --listen "$(addr "$1")" --ops-listen "$(ops_addr "$1")" --redis "$redis_addrs" --mysql "$MYSQL_DSN" \
		--kafka "$KAFKA_ADDR" --switches "$SWITCHES_FILE"
	if [[ "$1" == promo-admin ]] && approval_on; then
		printf '%s\0' --require-approval
	fi
	if replicas_on; then
		printf '%s\0' --redis-sentinels "$(sentinel_list ,)" --redis-sentinel-prefix "$SENTINEL_PREFIX"
		[[ "$1" != flow-sink ]] || printf '%s\0' --heal # the healer rebuilds a promoted replica
	fi
}

# sentinel_list SEP: the sentinels' addresses.
sentinel_list() {
	local sep="$1" i out=""
	for ((i = 0; i < SENTINELS; i++)); do
		out+="${out:+$sep}$REDIS_HOST:$((SENTINEL_BASE_PORT + i))"
	done
	printf '%s' "$out"
}

# redis_list SEP: the shard addresses in shard order.
redis_list() {
	local sep="$1" i out=""
	for ((i = 0; i < SHARDS; i++)); do
		out+="${out:+$sep}$REDIS_HOST:$((REDIS_BASE_PORT + i))"
	done
	printf '%s' "$out"
}

# ---- process bookkeeping --------------------------------------------------------------

pid_of() {
	local f="$PIDS/$1" pid
	[[ -r "$f" ]] || return 1
	pid="$(<"$f")"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	echo "$pid"
}

cmdline_of() {
	local pid
	pid="$(pid_of "$1")" || return 1
	[[ -r "/proc/$pid/cmdline" ]] || return 1
	printf ' %s ' "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
}

# ours NAME: the recorded pid still runs the program we started (a zombie has no cmdline).
ours() {
	local cmdline
	cmdline="$(cmdline_of "$1")" || return 1
	[[ "$cmdline" == *"$(signature "$1")"* ]]
}

# alive NAME: ours, and on the address configured now (redis-server retitles itself
# "redis-server host:port"; the others carry their address in their flags).
alive() {
	local cmdline
	cmdline="$(cmdline_of "$1")" || return 1
	[[ "$cmdline" == *"$(signature "$1")"* && "$cmdline" == *" $(addr "$1") "* ]]
}

tcp_open() {
	local host="${1%:*}" port="${1##*:}"
	timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null
}

http_ready() {
	local code
	code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$1/readyz" 2>/dev/null)" || true
	[[ "$code" == 200 ]]
}

# answers NAME: the component's port gives the right answer.
answers() {
	local a
	a="$(addr "$1")"
	case "$1" in
	redis-* | replica-* | sentinel-*) [[ "$(timeout 2 redis-cli -h "${a%:*}" -p "${a##*:}" ping 2>/dev/null)" == PONG ]] ;;
	kafka) tcp_open "$a" ;;
	*) http_ready "$a" ;;
	esac
}

running() { alive "$1" && answers "$1"; }

log_tail() {
	local f="$LOGS/$1.log"
	if [[ -s "$f" ]]; then
		log "last lines of $f:"
		tail -n 30 "$f" | sed 's/^/    /' >&2
	else
		log "$f is empty"
	fi
}

# launch NAME CMD...: start CMD detached from this shell and from any terminal, so it
# outlives `make up`; all its output goes to .run/logs/NAME.log.
launch() {
	local name="$1"
	shift
	printf '=== %s start: %s\n' "$(date -u +%FT%TZ)" "$*" >>"$LOGS/$name.log"
	rm -f "$PIDS/$name"
	# setsid forks when its caller leads a process group (a shell with job control
	# does that to every background job), so $! need not be the program's pid. The
	# program's own shell records its pid just before it execs the program instead.
	setsid nohup bash -c 'echo $$ >"$0"; exec "$@"' "$PIDS/$name" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -s "$PIDS/$name" ]] && break
		sleep 0.05
	done
	[[ "$name" == redis-* || "$name" == replica-* || "$name" == sentinel-* ]] || log "$name started (pid $(<"$PIDS/$name")), log $LOGS/$name.log"
}

# stop_all NAME...: SIGTERM, up to STOP_GRACE_SECS, then SIGKILL.
stop_all() {
	local name names=() i
	for name in "$@"; do
		if ours "$name"; then
			kill -TERM "$(pid_of "$name")" 2>/dev/null || true
			names+=("$name")
		fi
	done
	for ((i = 0; i < STOP_GRACE_SECS * 10; i++)); do
		local left=0
		for name in "${names[@]}"; do ours "$name" && left=1; done
		((left)) || break
		sleep 0.1
	done
	for name in "${names[@]}"; do
		if ours "$name"; then
			log "$name did not stop within ${STOP_GRACE_SECS}s; SIGKILL"
			kill -KILL "$(pid_of "$name")" 2>/dev/null || true
		fi
	done
	# Let the kernel tear killed processes down, so their ports are free for a restart.
	for ((i = 0; i < 20; i++)); do
		local left=0
		for name in "${names[@]}"; do ours "$name" && left=1; done
		((left)) || break
		sleep 0.1
	done
	for name in "${names[@]}"; do log "$name stopped"; done
	for name in "$@"; do rm -f "$PIDS/$name"; done
}

# port_free_or_die NAME: before starting, make sure a stranger does not hold the port
# (the new process would die at once, and we would talk to the stranger).
port_free_or_die() {
	local a holder=""
	a="$(addr "$1")"
	tcp_open "$a" || return 0
	if [[ "$1" == redis-* || "$1" == replica-* ]]; then
		holder="$(timeout 2 redis-cli -h "${a%:*}" -p "${a##*:}" info server 2>/dev/null |
			tr -d '\r' | sed -n 's/^process_id:/pid /p')" || true
	fi
	die "$1: $a is already taken by a process this stack did not start${holder:+ ($holder)}; stop it and run again"
}

# wait_ready NAME SECS [quiet]: wait for the component to answer, with progress dots
# unless quiet. Fails with the log tail when the process dies or the time runs out.
wait_ready() {
	local name="$1" secs="$2" quiet="${3:-}" i
	[[ -n "$quiet" ]] || printf 'stack: waiting for %s on %s ' "$name" "$(addr "$name")" >&2
	for ((i = 0; i < secs * 4; i++)); do
		# ours, not alive: until redis-server retitles itself during its start, its
		# command line does not carry host:port yet, and a busy machine stretches that.
		if ! ours "$name"; then
			[[ -n "$quiet" ]] || printf ' died\n' >&2
			log_tail "$name"
			die "$name exited during start"
		fi
		if answers "$name"; then
			[[ -n "$quiet" ]] || printf ' ready\n' >&2
			return 0
		fi
		((i % 4 == 0)) && [[ -z "$quiet" ]] && printf '.' >&2
		sleep 0.25
	done
	[[ -n "$quiet" ]] || printf ' timeout\n' >&2
	log_tail "$name"
	die "$name did not answer on $(addr "$name") within ${secs}s"
}

# stale_binary NAME: the running program's file was replaced by a later build.
stale_binary() {
	local pid exe
	pid="$(pid_of "$1")" || return 1
	exe="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
	[[ "$exe" == *" (deleted)" ]]
}

# ---- up -------------------------------------------------------------------------------

# needs_start NAME: false when it runs and answers (or answers within 5 s). Otherwise a
# live but silent process is stopped, a stale pid file removed, and true is returned.
needs_start() {
	local name="$1"
	if running "$name"; then
		return 1
	fi
	if alive "$name"; then
		# Alive but silent: maybe still starting. Give it a moment, then replace it.
		local i
		for ((i = 0; i < 20; i++)); do
			sleep 0.25
			answers "$name" && return 1
			alive "$name" || break
		done
		if alive "$name"; then
			log "$name (pid $(pid_of "$name")) is alive but does not answer; restarting it"
			stop_all "$name"
		fi
	elif [[ -e "$PIDS/$name" ]]; then
		log "$name (pid $(<"$PIDS/$name")) is gone; restarting it"
	fi
	rm -f "$PIDS/$name"
	return 0
}

start_redis() {
	local name="$1" port dir
	port="$(redis_port "$name")"
	dir="$RUN/redis/$port"
	mkdir -p "$dir"
	port_free_or_die "$name"
	# No persistence: a killed shard comes back empty, as a lost master would. A
	# server that was once a replica may have left the RDB of its full sync here;
	# it would be loaded at start, so it goes first. A deleted promotion's ledger
	# expires rather than being unlinked (lua/delete.lua): freed off the main thread.
	rm -rf "$dir/dump.rdb" "$dir/appendonlydir"
	launch "$name" redis-server --bind "$REDIS_HOST" --port "$port" --dir "$dir" \
		--save "" --appendonly no --lazyfree-lazy-expire yes --daemonize no --logfile ""
}

# start_replica NAME: a replica of its shard's master, as volatile as the master.
start_replica() {
	local name="$1" port dir shard
	port="$(replica_port "$name")"
	shard="${name#replica-}"
	dir="$RUN/redis/$port"
	mkdir -p "$dir"
	port_free_or_die "$name"
	rm -rf "$dir/dump.rdb" "$dir/appendonlydir"
	launch "$name" redis-server --bind "$REDIS_HOST" --port "$port" --dir "$dir" \
		--save "" --appendonly no --lazyfree-lazy-expire yes --daemonize no --logfile "" \
		--replicaof "$REDIS_HOST" "$((REDIS_BASE_PORT + shard))" --repl-diskless-sync yes --repl-diskless-sync-delay 0
}

# start_sentinel NAME: a sentinel watching every shard's master. Its config is
# written once and then kept by the sentinel itself (it records failovers there),
# so a restarted sentinel knows the current masters; `down` removes it.
start_sentinel() {
	local name="$1" port dir conf i
	port="$(sentinel_port "$name")"
	dir="$RUN/sentinel/$port"
	conf="$dir/sentinel.conf"
	mkdir -p "$dir"
	port_free_or_die "$name"
	if [[ ! -s "$conf" ]]; then
		{
			printf 'bind %s\nport %s\ndaemonize no\ndir %s\nsentinel resolve-hostnames no\n' "$REDIS_HOST" "$port" "$dir"
			for ((i = 0; i < SHARDS; i++)); do
				printf 'sentinel monitor %s%d %s %d %d\n' "$SENTINEL_PREFIX" "$i" "$REDIS_HOST" "$((REDIS_BASE_PORT + i))" "$SENTINEL_QUORUM"
				printf 'sentinel down-after-milliseconds %s%d %d\n' "$SENTINEL_PREFIX" "$i" "$SENTINEL_DOWN_AFTER_MS"
				printf 'sentinel failover-timeout %s%d 10000\n' "$SENTINEL_PREFIX" "$i"
				printf 'sentinel parallel-syncs %s%d 1\n' "$SENTINEL_PREFIX" "$i"
			done
		} >"$conf"
	fi
	launch "$name" redis-sentinel "$conf"
}

# start_group START_FN NAME...: start those that need it, then wait for them together.
start_group() {
	local fn="$1" name started=()
	shift
	for name in "$@"; do
		if needs_start "$name"; then
			"$fn" "$name"
			started+=("$name")
		fi
	done
	for name in "${started[@]}"; do wait_ready "$name" "$REDIS_READY_SECS" quiet; done
	((${#started[@]} == 0)) || log "started ${started[*]}"
}

start_kafka() {
	port_free_or_die kafka
	# The broker keeps its log and the sink's offsets here, so a killed broker comes
	# back with every event it acknowledged, as Kafka does.
	mkdir -p "$RUN/kafka"
	launch kafka "$BIN/kafka-broker" -addr "$KAFKA_ADDR" -data-dir "$RUN/kafka"
}

# service_available NAME: its binary exists (and, for the sink, knows the subcommand).
service_available() {
	case "$1" in
	grab-service | promo-admin)
		[[ -x "$BIN/$1" ]] || { log "WARNING: skipping $1: $BIN/$1 not built (no main package yet?)"; return 1; }
		;;
	flow-sink)
		[[ -x "$BIN/recovery" ]] || { log "WARNING: skipping flow-sink: $BIN/recovery not built (no main package yet?)"; return 1; }
		if ! timeout 10 "$BIN/recovery" sink --help >/dev/null 2>&1; then
			log "WARNING: skipping flow-sink: \`bin/recovery sink --help\` fails (sink subcommand not implemented yet?)"
			return 1
		fi
		;;
	esac
}

ensure_switches() {
	if [[ -e "$SWITCHES_FILE" ]]; then
		# A failover left in force points a shard away from its own server.
		if grep -q '"shardAddrs"' "$SWITCHES_FILE"; then
			log "warning: $SWITCHES_FILE moves shards to other servers (shardAddrs); FLASHSALE_ONCALL_TOKEN=dev-oncall-token bin/configctl --file $SWITCHES_FILE --api http://$ADMIN_ADDR set shardAddrs.N - moves one back (through promo-admin, once it runs)"
		fi
		return 0
	fi
	cat >"$SWITCHES_FILE" <<'JSON'
{"grabEnabled": true, "kafkaDegrade": false, "degradeRateFactor": 0.5, "methodLimits": {"grab": 0, "cancel": 0}, "blockedPromotions": []}
JSON
	log "wrote default switches to $SWITCHES_FILE"
}

json_str() {
	local s="$1"
	s="${s//\\/\\\\}"
	s="${s//\"/\\\"}"
	printf '"%s"' "$s"
}

# write_stack_file: .run/stack.json in the shape of internal/stack.File; a component that
# is not running has pid 0.
write_stack_file() {
	local tmp="$STACK_FILE.tmp" name pid first=1 i
	{
		printf '{\n'
		printf '  "grab": %s,\n' "$(json_str "http://$GRAB_ADDR")"
		printf '  "admin": %s,\n' "$(json_str "http://$ADMIN_ADDR")"
		printf '  "sink": %s,\n' "$(json_str "http://$SINK_ADDR")"
		printf '  "ops": {"grab": %s, "admin": %s, "sink": %s},\n' "$(json_str "http://$GRAB_OPS_ADDR")" \
			"$(json_str "http://$ADMIN_OPS_ADDR")" "$(json_str "http://$SINK_OPS_ADDR")"
		printf '  "redis": ['
		for ((i = 0; i < SHARDS; i++)); do
			((i)) && printf ', '
			json_str "$REDIS_HOST:$((REDIS_BASE_PORT + i))"
		done
		printf '],\n'
		if replicas_on; then
			printf '  "replicas": ['
			for ((i = 0; i < SHARDS; i++)); do
				((i)) && printf ', '
				json_str "$REDIS_HOST:$((REDIS_BASE_PORT + REPLICA_OFFSET + i))"
			done
			printf '],\n'
			printf '  "sentinels": ['
			for ((i = 0; i < SENTINELS; i++)); do
				((i)) && printf ', '
				json_str "$REDIS_HOST:$((SENTINEL_BASE_PORT + i))"
			done
			printf '],\n  "sentinelPrefix": %s,\n' "$(json_str "$SENTINEL_PREFIX")"
		fi
		printf '  "kafka": [%s],\n' "$(json_str "$KAFKA_ADDR")"
		printf '  "mysqlDSN": %s,\n' "$(json_str "$MYSQL_DSN")"
		printf '  "switchesFile": %s,\n' "$(json_str "$SWITCHES_FILE")"
		printf '  "logsDir": %s,\n' "$(json_str "$LOGS")"
		printf '  "pids": {'
		while IFS= read -r name; do
			pid=0
			alive "$name" && pid="$(pid_of "$name")"
			((first)) || printf ','
			first=0
			printf '\n    %s: %d' "$(json_str "$name")" "$pid"
		done < <(all_components)
		printf '\n  }\n}\n'
	} >"$tmp"
	mv "$tmp" "$STACK_FILE"
}

cmd_up() {
	log "checking machine dependencies"
	"$ROOT/deploy/local/deps.sh"

	# `make up` has just built (STACK_BUILT=1); run on its own, build what bin/ lacks.
	local b missing=0
	for b in kafka-broker grab-service promo-admin recovery; do
		[[ -x "$BIN/$b" ]] || missing=1
	done
	if ((missing)) && [[ "${STACK_BUILT:-}" != 1 ]]; then
		log "bin/ lacks binaries; building"
		"$ROOT/deploy/build.sh"
	fi
	[[ -x "$BIN/kafka-broker" ]] || die "$BIN/kafka-broker missing after build"

	mkdir -p "$LOGS" "$PIDS" "$RUN/redis"
	ensure_switches

	# Redis shards first: start all that are missing, then wait for them together.
	local name started=()
	for ((i = 0; i < SHARDS; i++)); do
		name="redis-$i"
		if needs_start "$name"; then
			start_redis "$name"
			started+=("$name")
		fi
	done
	if ((${#started[@]})); then
		log "started ${started[*]} (logs $LOGS/redis-*.log)"
	fi
	for name in "${started[@]}"; do wait_ready "$name" "$REDIS_READY_SECS" quiet; done
	log "redis: $SHARDS shards answer PING on $(redis_list ' ')"
	if replicas_on; then
		mkdir -p "$RUN/sentinel"
		mapfile -t names < <(replica_names)
		start_group start_replica "${names[@]}"
		mapfile -t names < <(sentinel_names)
		start_group start_sentinel "${names[@]}"
		log "replicas and sentinels: $SENTINELS sentinels on $(sentinel_list ' ') watch ${SENTINEL_PREFIX}0..$((SHARDS - 1))"
	fi

	if needs_start kafka; then
		start_kafka
		wait_ready kafka "$KAFKA_READY_SECS"
	fi
	log "kafka: answers on $KAFKA_ADDR"

	local waiting=()
	for name in "${SERVICES[@]}"; do
		if alive "$name"; then
			if stale_binary "$name"; then
				log "note: $name (pid $(pid_of "$name")) runs an older build; \`make down up\` to run the new one"
			fi
			# Running, or alive and still starting: leave it and only wait for it below.
			waiting+=("$name")
			continue
		fi
		[[ -e "$PIDS/$name" ]] && log "$name (pid $(<"$PIDS/$name")) is gone; restarting it"
		rm -f "$PIDS/$name"
		service_available "$name" || continue
		port_free_or_die "$name"
		local -a cmd=()
		mapfile -d '' cmd < <(service_cmd "$name")
		launch "$name" "${cmd[@]}"
		waiting+=("$name")
	done

	write_stack_file

	for name in "${waiting[@]}"; do wait_ready "$name" "$SERVICE_READY_SECS"; done
	write_stack_file
	# A shard that came back empty while MySQL still holds promotions for it (a killed
	# shard, or the whole stack after `make down`) stays fenced by grab-service until it
	# is rebuilt from the record; rebuild just those (on a fresh stack this only writes
	# each shard's built marker).
	# FLASHSALE_NO_REBUILD=1 leaves that to the caller (the demo shows it step by step).
	if [[ -x "$BIN/recovery" && "${FLASHSALE_NO_REBUILD:-}" != 1 ]]; then
		log "recovery: rebuilding shards that lost their data"
		"$BIN/recovery" rebuild --missing --quiet --stack "$STACK_FILE" || die "recovery rebuild --missing failed"
	fi
	log "up: stack file $STACK_FILE"
	cmd_status
}

cmd_down() {
	# Services first, so they do not log a storm of errors about vanished dependencies.
	stop_all "${SERVICES[@]}"
	stop_all kafka
	local shards=() names=()
	mapfile -t names < <(sentinel_names)
	stop_all "${names[@]}" # before the masters, or they would fail them over
	mapfile -t names < <(replica_names)
	stop_all "${names[@]}"
	for ((i = 0; i < SHARDS; i++)); do shards+=("redis-$i"); done
	stop_all "${shards[@]}"
	rm -rf "$STACK_FILE" "$RUN/sentinel"
	log "down: local stack stopped (MariaDB and any system redis keep running)"
}

cmd_status() {
	local name state pid
	while IFS= read -r name; do
		if alive "$name"; then
			pid="$(pid_of "$name")"
			if answers "$name"; then state="running (pid $pid)"; else state="not answering (pid $pid)"; fi
		else
			state="stopped"
			case "$name" in
			grab-service | promo-admin) [[ -x "$BIN/$name" ]] || state+=" (not built)" ;;
			flow-sink) [[ -x "$BIN/recovery" ]] || state+=" (not built)" ;;
			esac
		fi
		printf '%-13s %-16s %s\n' "$name" "$(addr "$name")" "$state"
	done < <(all_components)
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
*)
	echo "usage: $0 up|down|status" >&2
	exit 2
	;;
esac
