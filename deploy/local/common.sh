# common.sh: settings and helpers shared by deploy/local/{up,status,down,clean}.sh.
# Sourced, not run. Every setting can be overridden from the environment
# (or on make's command line: make cluster ZK_PORT=2182).

# The repository root, whatever the current directory.
STRATA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Everything the cluster writes (configs, data, logs, pid files) lives here.
CLUSTER_DIR="${CLUSTER_DIR:-$STRATA_ROOT/.cluster}"
CLUSTER_DIR="$(realpath -m "$CLUSTER_DIR")"

STRATA_BIN="${STRATA_BIN:-$STRATA_ROOT/strata}"
BROKER_HOST="${BROKER_HOST:-127.0.0.1}"
BROKER_IDS=(1 2 3)
BROKER_BASE_PORT="${BROKER_BASE_PORT:-9092}" # broker N listens on BASE+N-1
# Broker N serves metrics.listener (/metrics, /healthz, /readyz;
# docs/monitoring.md) on BASE+N-1.
METRICS_BASE_PORT="${METRICS_BASE_PORT:-9404}"
ZK_PORT="${ZK_PORT:-2181}"
ZK_CHROOT="${ZK_CHROOT:-/strata}"
MINIO_PORT="${MINIO_PORT:-9000}"
MINIO_CONSOLE_PORT="${MINIO_CONSOLE_PORT:-9001}"
MINIO_ROOT_USER="${MINIO_ROOT_USER:-strata}"
MINIO_ROOT_PASSWORD="${MINIO_ROOT_PASSWORD:-strata-secret}"
MINIO_BUCKET="${MINIO_BUCKET:-strata}"

# How long each component may take to become ready, in seconds.
READY_TIMEOUT="${READY_TIMEOUT:-60}"
# How long a broker may take to exit after SIGTERM before SIGKILL.
STOP_TIMEOUT="${STOP_TIMEOUT:-30}"

ZK_JARS="/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
ZK_MAIN="org.apache.zookeeper.server.quorum.QuorumPeerMain"

# SECURE=1 (make cluster SECURE=1) makes a TLS + SCRAM cluster: each broker
# has an INTERNAL SSL listener (inter-broker, client certificates required,
# replication over mutual TLS) on BROKER_INTERNAL_BASE_PORT+N-1 and an
# EXTERNAL SASL_SSL listener with SCRAM-SHA-512 for clients on
# BROKER_BASE_PORT+N-1. A cluster made so remembers it ($CLUSTER_DIR/secure),
# so cluster-status and cluster-stop need no SECURE=1.
BROKER_INTERNAL_BASE_PORT="${BROKER_INTERNAL_BASE_PORT:-$((BROKER_BASE_PORT + 10000))}"
CERTS_DIR="$CLUSTER_DIR/certs"
# The client properties for the EXTERNAL listener (SASL_SSL, user admin).
CLIENT_PROPS="$CLUSTER_DIR/client.properties"
# The properties for the INTERNAL listener with the admin client certificate.
ADMIN_SSL_PROPS="$CLUSTER_DIR/admin-ssl.properties"
ADMIN_USER="${ADMIN_USER:-admin}"
ADMIN_PASSWORD_FILE="$CLUSTER_DIR/admin.password"
if [ -f "$CLUSTER_DIR/secure" ]; then
	CLUSTER_SECURE=1
elif [ "${SECURE:-0}" != 0 ] && [ -n "${SECURE:-}" ]; then
	CLUSTER_SECURE=1
else
	CLUSTER_SECURE=0
fi

broker_port() { echo $((BROKER_BASE_PORT + $1 - 1)); }
broker_metrics_port() { echo $((METRICS_BASE_PORT + $1 - 1)); }
broker_metrics_addr() { echo "$BROKER_HOST:$(broker_metrics_port "$1")"; }
# http_status PORT PATH: the HTTP status code of GET PATH on 127.0.0.1:PORT
# (bash's /dev/tcp: no curl needed), empty when nothing answers.
http_status() {
	timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" "$2" >&3 && head -n 1 <&3' _ "$1" "$2" 2>/dev/null |
		awk '{print $2}'
}
# broker_ready ID: broker ID's /readyz answers 200 (registered, serving).
broker_ready() { [ "$(http_status "$(broker_metrics_port "$1")" /readyz)" = 200 ]; }
broker_internal_port() { echo $((BROKER_INTERNAL_BASE_PORT + $1 - 1)); }
broker_internal_addr() { echo "$BROKER_HOST:$(broker_internal_port "$1")"; }
# client_flags: the flags a strata client command needs to reach the
# cluster's client listener (none for a PLAINTEXT cluster).
client_flags() {
	[ "$CLUSTER_SECURE" = 1 ] && echo "--command-config $CLIENT_PROPS"
	return 0
}
broker_addr() { echo "$BROKER_HOST:$(broker_port "$1")"; }
bootstrap() {
	local out="" id
	for id in "${BROKER_IDS[@]}"; do out="${out:+$out,}$(broker_addr "$id")"; done
	echo "$out"
}
zk_connect() { echo "127.0.0.1:$ZK_PORT$ZK_CHROOT"; }
minio_endpoint() { echo "http://127.0.0.1:$MINIO_PORT"; }

# Component names: zookeeper, minio, broker-1 .. broker-3. Each has a
# directory $CLUSTER_DIR/NAME with its log NAME.log and pid file NAME.pid.
comp_dir() { echo "$CLUSTER_DIR/$1"; }
comp_pidfile() { echo "$CLUSTER_DIR/$1/$1.pid"; }
comp_log() { echo "$CLUSTER_DIR/$1/$1.log"; }

# comp_marker NAME: a string the process's command line contains, so that a
# pid reused by an unrelated process is not mistaken for ours.
comp_marker() {
	case "$1" in
	zookeeper) echo "$CLUSTER_DIR/zookeeper/zoo.cfg" ;;
	minio) echo "$CLUSTER_DIR/minio/data" ;;
	broker-*) echo "$CLUSTER_DIR/$1/server.properties" ;;
	esac
}

# comp_pid NAME prints the pid of the running component and succeeds, or
# fails (removing a stale pid file).
comp_pid() {
	local f pid
	f="$(comp_pidfile "$1")"
	[ -f "$f" ] || return 1
	pid="$(cat "$f" 2>/dev/null)"
	if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$(comp_marker "$1")"; then
		echo "$pid"
		return 0
	fi
	rm -f "$f"
	return 1
}

# port_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
	timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# port_owner PORT: a description of who listens on PORT, if ss can tell.
port_owner() {
	command -v ss >/dev/null || return 0
	ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'users:(.*)' | head -1
}

# require_free_port PORT WHAT: fail with a message naming PORT when it is taken.
require_free_port() {
	if port_open "$1"; then
		local owner
		owner="$(port_owner "$1")"
		die "port $1 (for $2) is already in use${owner:+ by $owner}, not by this cluster.
Stop whatever listens there, or pick another port, e.g.: make cluster $3=<free port>"
	fi
}

# stop_pid NAME PID TIMEOUT: SIGTERM, wait up to TIMEOUT seconds, then SIGKILL.
stop_pid() {
	local name="$1" pid="$2" t="$3" i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < t * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || { echo "  $name (pid $pid) stopped"; return 0; }
		sleep 0.1
	done
	echo "  $name (pid $pid) still running ${t}s after SIGTERM: SIGKILL" >&2
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	echo "  $name (pid $pid) did not exit after SIGKILL" >&2
	return 1
}

# log_tail NAME: the last lines of a component's log, for error messages.
log_tail() {
	local f
	f="$(comp_log "$1")"
	[ -f "$f" ] && { echo "--- last lines of $f:"; tail -n 20 "$f"; echo "---"; }
}

die() {
	echo "cluster: $*" >&2
	exit 1
}
