#!/usr/bin/env bash
# up.sh (make cluster): starts a local Strata cluster on this machine:
# ZooKeeper, MinIO with a bucket, and three brokers tiering to MinIO, all
# under $CLUSTER_DIR (default .cluster/ in the repository). Components that
# already run (pid file + live process) are left alone, so running it again
# is harmless; one that died is started again with its data.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# --- prerequisites ---------------------------------------------------------

minio_bin() {
	if [ -n "${STRATA_MINIO:-}" ]; then echo "$STRATA_MINIO"; return; fi
	local gobin
	gobin="$(go env GOBIN 2>/dev/null || true)"
	[ -n "$gobin" ] || gobin="$(go env GOPATH 2>/dev/null | cut -d: -f1)/bin"
	if [ -x "$gobin/minio" ]; then echo "$gobin/minio"; return; fi
	command -v minio || true
}

need_deps=""
command -v java >/dev/null || need_deps="java"
for f in /usr/share/java/zookeeper.jar /usr/share/java/slf4j-simple.jar; do
	[ -f "$f" ] || need_deps="$need_deps $f"
done
[ -n "$(minio_bin)" ] || need_deps="$need_deps minio"
command -v kcat >/dev/null || need_deps="$need_deps kcat"
if [ -n "$need_deps" ]; then
	# The test dependencies script installs ZooKeeper (Debian package) and
	# kcat, and builds MinIO from the Go module proxy; it is idempotent.
	echo "cluster: missing$need_deps; installing with deploy/scripts/install-test-deps.sh"
	bash "$STRATA_ROOT/deploy/scripts/install-test-deps.sh" ||
		die "could not install the prerequisites (ZooKeeper, MinIO, kcat); run 'sudo make deps' and try again"
fi
MINIO_BIN="$(minio_bin)"
[ -x "$MINIO_BIN" ] || die "no minio binary after the install step; build it with: bash deploy/scripts/install-test-deps.sh"
[ -x "$STRATA_BIN" ] || (cd "$STRATA_ROOT" && go build -o "$STRATA_BIN" ./cmd/strata)

mkdir -p "$CLUSTER_DIR/bin"
# The bucket helper, rebuilt when its source changes (go build caches).
(cd "$STRATA_ROOT" && go build -o "$CLUSTER_DIR/bin/mkbucket" ./deploy/local/mkbucket) ||
	die "could not build deploy/local/mkbucket"

# start_bg NAME CMD...: runs CMD in its own session, detached from this
# shell and the terminal, output appended to NAME's log, pid in its pid file.
start_bg() {
	local name="$1"
	shift
	local dir
	dir="$(comp_dir "$name")"
	mkdir -p "$dir"
	echo "=== $(date -u '+%Y-%m-%dT%H:%M:%SZ') started by deploy/local/up.sh" >>"$(comp_log "$name")"
	(cd "$dir" && exec setsid "$@" >>"$(comp_log "$name")" 2>&1 </dev/null) &
	echo $! >"$(comp_pidfile "$name")"
}

# wait_ready NAME CHECK...: polls CHECK until it succeeds; fails with the
# log's tail when the process dies or READY_TIMEOUT passes.
wait_ready() {
	local name="$1" i
	shift
	for ((i = 0; i < READY_TIMEOUT * 5; i++)); do
		"$@" && return 0
		if ! comp_pid "$name" >/dev/null; then
			log_tail "$name" >&2
			die "$name exited during start (log: $(comp_log "$name"))"
		fi
		sleep 0.2
	done
	log_tail "$name" >&2
	die "$name not ready within ${READY_TIMEOUT}s (log: $(comp_log "$name"))"
}

# --- ports ---------------------------------------------------------------
# Every port of a component that is not running must be free before
# anything starts, so a conflict does not leave half a cluster.
comp_pid zookeeper >/dev/null || require_free_port "$ZK_PORT" ZooKeeper ZK_PORT
if ! comp_pid minio >/dev/null; then
	require_free_port "$MINIO_PORT" "MinIO S3 API" MINIO_PORT
	require_free_port "$MINIO_CONSOLE_PORT" "MinIO console" MINIO_CONSOLE_PORT
fi
for id in "${BROKER_IDS[@]}"; do
	comp_pid "broker-$id" >/dev/null || require_free_port "$(broker_port "$id")" "broker-$id" BROKER_BASE_PORT
done

# --- ZooKeeper -------------------------------------------------------------

zk_ok() {
	# srvr is a four-letter command; it answers "Mode: standalone" once
	# the server serves clients.
	timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$ZK_PORT; printf srvr >&3; cat <&3" 2>/dev/null | grep -q '^Mode:'
}

if pid="$(comp_pid zookeeper)"; then
	echo "zookeeper already running (pid $pid)"
else
	require_free_port "$ZK_PORT" ZooKeeper ZK_PORT
	d="$(comp_dir zookeeper)"
	mkdir -p "$d/data"
	cat >"$d/zoo.cfg" <<CFG
# written by deploy/local/up.sh (rewritten at every start)
tickTime=2000
dataDir=$d/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,stat
maxClientCnxns=0
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
CFG
	echo "starting zookeeper on 127.0.0.1:$ZK_PORT"
	start_bg zookeeper java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
		-Dzookeeper.admin.enableServer=false \
		-cp "$ZK_JARS" "$ZK_MAIN" "$d/zoo.cfg"
	wait_ready zookeeper zk_ok
	echo "zookeeper ready (pid $(comp_pid zookeeper))"
fi

# --- MinIO -----------------------------------------------------------------

export AWS_ACCESS_KEY_ID="$MINIO_ROOT_USER" AWS_SECRET_ACCESS_KEY="$MINIO_ROOT_PASSWORD"
if pid="$(comp_pid minio)"; then
	echo "minio already running (pid $pid)"
else
	require_free_port "$MINIO_PORT" "MinIO S3 API" MINIO_PORT
	require_free_port "$MINIO_CONSOLE_PORT" "MinIO console" MINIO_CONSOLE_PORT
	d="$(comp_dir minio)"
	mkdir -p "$d/data" "$d/certs"
	echo "starting minio on 127.0.0.1:$MINIO_PORT (console 127.0.0.1:$MINIO_CONSOLE_PORT)"
	start_bg minio env HOME="$d" MINIO_ROOT_USER="$MINIO_ROOT_USER" MINIO_ROOT_PASSWORD="$MINIO_ROOT_PASSWORD" \
		MINIO_UPDATE=off \
		"$MINIO_BIN" server "$d/data" --address "127.0.0.1:$MINIO_PORT" \
		--console-address "127.0.0.1:$MINIO_CONSOLE_PORT" --certs-dir "$d/certs"
fi
# mkbucket waits for /minio/health/ready, then creates the bucket if needed.
"$CLUSTER_DIR/bin/mkbucket" -endpoint "$(minio_endpoint)" -bucket "$MINIO_BUCKET" -timeout "${READY_TIMEOUT}s" || {
	log_tail minio >&2
	die "minio not ready or bucket $MINIO_BUCKET not created (log: $(comp_log minio))"
}
comp_pid minio >/dev/null || { log_tail minio >&2; die "minio exited (log: $(comp_log minio))"; }

# --- brokers ---------------------------------------------------------------

started=()
for id in "${BROKER_IDS[@]}"; do
	name="broker-$id"
	if pid="$(comp_pid "$name")"; then
		echo "$name already running (pid $pid, $(broker_addr "$id"))"
		continue
	fi
	require_free_port "$(broker_port "$id")" "$name" BROKER_BASE_PORT
	d="$(comp_dir "$name")"
	mkdir -p "$d/data"
	props="$d/server.properties"
	# Rewritten at every start from the settings above; lines of
	# $CLUSTER_DIR/extra.properties, if it exists, are appended (a later
	# key wins), so that is where to add or change broker settings.
	cat >"$props" <<PROPS
# Broker $id of the local cluster, written by deploy/local/up.sh at every
# start: put your own settings in $CLUSTER_DIR/extra.properties instead.
broker.id=$id
listeners=PLAINTEXT://$(broker_addr "$id")
advertised.listeners=PLAINTEXT://$(broker_addr "$id")
log.dirs=$d/data
zookeeper.connect=$(zk_connect)
zookeeper.session.timeout.ms=18000
num.partitions=3
default.replication.factor=3
offsets.topic.replication.factor=3
# Tiered storage: sealed segments go to the MinIO bucket; credentials come
# from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (set by up.sh).
remote.log.storage.system.enable=true
remote.storage.s3.endpoint=$(minio_endpoint)
remote.storage.s3.bucket=$MINIO_BUCKET
remote.storage.s3.region=us-east-1
remote.storage.s3.path.style.access=true
remote.storage.s3.prefix=local-cluster
PROPS
	if [ -f "$CLUSTER_DIR/extra.properties" ]; then
		{
			echo "# from $CLUSTER_DIR/extra.properties"
			cat "$CLUSTER_DIR/extra.properties"
			echo
		} >>"$props"
	fi
	echo "starting $name on $(broker_addr "$id")"
	start_bg "$name" "$STRATA_BIN" broker --config "$props"
	started+=("$id")
done

for id in "${started[@]}"; do
	wait_ready "broker-$id" port_open "$(broker_port "$id")"
	echo "broker-$id ready (pid $(comp_pid "broker-$id"), $(broker_addr "$id"))"
done

# Every broker registered: the cluster's metadata lists all three.
n=0
for ((i = 0; i < READY_TIMEOUT * 2; i++)); do
	out="$(timeout 10 "$STRATA_BIN" cluster --bootstrap-server "$(bootstrap)" 2>&1 || true)"
	n=0
	for id in "${BROKER_IDS[@]}"; do
		grep -qF "$(broker_addr "$id")" <<<"$out" && n=$((n + 1))
	done
	[ "$n" -eq "${#BROKER_IDS[@]}" ] && break
	sleep 0.5
done
if [ "$n" -ne "${#BROKER_IDS[@]}" ]; then
	echo "$out" >&2
	die "only $n of ${#BROKER_IDS[@]} brokers registered within ${READY_TIMEOUT}s; see $CLUSTER_DIR/broker-*/broker-*.log"
fi

BS="$(bootstrap)"
cat <<INFO

Strata local cluster is up. Everything (configs, data, logs, pid files) is in
  $CLUSTER_DIR

  brokers        $BS   (broker.id 1-3)
  zookeeper      $(zk_connect)
  minio S3 API   $(minio_endpoint)   bucket: $MINIO_BUCKET (prefix local-cluster/)
  minio console  http://127.0.0.1:$MINIO_CONSOLE_PORT   user: $MINIO_ROOT_USER   password: $MINIO_ROOT_PASSWORD
  logs           $CLUSTER_DIR/<component>/<component>.log

Create a topic (3 partitions, 3 replicas):
  ./strata topic create --bootstrap-server $BS --topic demo --partitions 3 --replication-factor 3
Produce and consume with strata:
  printf 'k1:hello\nk2:world\n' | ./strata produce --bootstrap-server $BS --key-separator : demo
  ./strata consume --bootstrap-server $BS --from-beginning --print-key --timeout 5s demo
Produce and consume with kcat:
  echo 'k3:from kcat' | kcat -P -b $BS -t demo -K:
  kcat -C -b $BS -t demo -o beginning -e -f '%p %o %k %s\n'
Inspect:
  make cluster-status
  ./strata topic describe --bootstrap-server $BS --topic demo
  AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD ./strata tier status --config $CLUSTER_DIR/broker-1/server.properties
Stop (data kept): make cluster-stop      Remove everything: make cluster-clean
INFO
