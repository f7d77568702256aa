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

# start_alive NAME: the process start_bg launched is still alive. Not
# comp_pid: until the background shell has exec'd the component (slow on
# a loaded machine), its command line is this script's, not the
# component's, and comp_pid would take the pid file for a stale one.
start_alive() {
	local pid
	pid="$(cat "$(comp_pidfile "$1")" 2>/dev/null)"
	[[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

# wait_ready NAME CHECK...: polls CHECK until it succeeds; fails with the
# log's tail when the process dies or READY_TIMEOUT passes.
wait_ready() {
	local name="$1" i
	shift
	for ((i = 0; i < READY_TIMEOUT * 5; i++)); do
		"$@" && return 0
		if ! start_alive "$name"; then
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
	comp_pid "broker-$id" >/dev/null || require_free_port "$(broker_metrics_port "$id")" "broker-$id metrics.listener" METRICS_BASE_PORT
	if [ "$CLUSTER_SECURE" = 1 ]; then
		comp_pid "broker-$id" >/dev/null ||
			require_free_port "$(broker_internal_port "$id")" "broker-$id INTERNAL listener" BROKER_INTERNAL_BASE_PORT
	fi
done

# A cluster is made secure or not once: its brokers' data, users and
# clients depend on it.
if [ "$CLUSTER_SECURE" = 1 ] && [ ! -f "$CLUSTER_DIR/secure" ] && [ -f "$CLUSTER_DIR/broker-1/server.properties" ]; then
	die "the cluster in $CLUSTER_DIR was made without SECURE=1; remove it first (make cluster-clean) or use another CLUSTER_DIR"
fi

# --- certificates and the admin user's password (SECURE=1) ----------------

if [ "$CLUSTER_SECURE" = 1 ]; then
	mkdir -p "$CLUSTER_DIR"
	touch "$CLUSTER_DIR/secure"
	# strata certs create: a CA, one keystore per broker (SANs: the broker
	# host and localhost) and the admin client certificate (CN=admin), made
	# once and kept with the cluster.
	if [ ! -f "$CERTS_DIR/client-$ADMIN_USER.pem" ]; then
		ids="$(IFS=,; echo "${BROKER_IDS[*]}")"
		echo "creating certificates in $CERTS_DIR"
		"$STRATA_BIN" certs create --dir "$CERTS_DIR" --hosts "$BROKER_HOST,localhost" \
			--broker-id "$ids" --client "$ADMIN_USER" >/dev/null ||
			die "strata certs create failed"
	fi
	if [ ! -s "$ADMIN_PASSWORD_FILE" ]; then
		(umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=\n' >"$ADMIN_PASSWORD_FILE" && echo >>"$ADMIN_PASSWORD_FILE")
	fi
	ADMIN_PASSWORD="$(head -n 1 "$ADMIN_PASSWORD_FILE")"
	(
		umask 077
		cat >"$ADMIN_SSL_PROPS" <<PROPS
# The admin client certificate on the INTERNAL (SSL) listener, written by
# deploy/local/up.sh: strata ... --bootstrap-server $(broker_internal_addr 1) --command-config $ADMIN_SSL_PROPS
security.protocol=SSL
ssl.truststore.location=$CERTS_DIR/truststore.pem
ssl.keystore.location=$CERTS_DIR/client-$ADMIN_USER.pem
PROPS
		cat >"$CLIENT_PROPS" <<PROPS
# The EXTERNAL (SASL_SSL) listener as user $ADMIN_USER, written by
# deploy/local/up.sh: strata ... --command-config $CLIENT_PROPS
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$ADMIN_USER" password="$ADMIN_PASSWORD";
ssl.truststore.location=$CERTS_DIR/truststore.pem
PROPS
		# The same for kcat and other librdkafka clients: kcat -F FILE.
		cat >"$CLUSTER_DIR/kcat.conf" <<PROPS
# librdkafka settings for the EXTERNAL (SASL_SSL) listener as user $ADMIN_USER,
# written by deploy/local/up.sh: kcat -F $CLUSTER_DIR/kcat.conf ...
security.protocol=SASL_SSL
sasl.mechanisms=SCRAM-SHA-512
sasl.username=$ADMIN_USER
sasl.password=$ADMIN_PASSWORD
ssl.ca.location=$CERTS_DIR/truststore.pem
PROPS
	)
fi

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
	require_free_port "$(broker_metrics_port "$id")" "$name metrics.listener" METRICS_BASE_PORT
	if [ "$CLUSTER_SECURE" = 1 ]; then
		listeners="INTERNAL://$(broker_internal_addr "$id"),EXTERNAL://$(broker_addr "$id")"
		security="# SECURE=1: INTERNAL is SSL with client certificates required (other
# brokers, replication over mutual TLS, the admin certificate); EXTERNAL is
# SASL_SSL with SCRAM-SHA-512 users (strata users).
listener.security.protocol.map=INTERNAL:SSL,EXTERNAL:SASL_SSL
inter.broker.listener.name=INTERNAL
ssl.keystore.location=$CERTS_DIR/broker-$id.pem
ssl.truststore.location=$CERTS_DIR/truststore.pem
listener.name.internal.ssl.client.auth=required
listener.name.external.sasl.enabled.mechanisms=SCRAM-SHA-512
# ACLs (docs/security.md): the admin SCRAM user and the admin client
# certificate's subject are super users; everyone else needs ACLs
# (strata acl add ...). Brokers need none: they speak to each other only
# over replication (mutual TLS).
authorizer.class.name=kafka.security.authorizer.AclAuthorizer
super.users=User:$ADMIN_USER;User:CN=$ADMIN_USER
allow.everyone.if.no.acl.found=false"
	else
		listeners="PLAINTEXT://$(broker_addr "$id")"
		security=""
	fi
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
listeners=$listeners
advertised.listeners=$listeners
$security
log.dirs=$d/data
# /metrics, /healthz and /readyz (docs/monitoring.md), one port per broker.
metrics.listener=$(broker_metrics_addr "$id")
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
	if [ "$CLUSTER_SECURE" = 1 ]; then
		echo "starting $name on $(broker_addr "$id") (EXTERNAL, SASL_SSL) and $(broker_internal_addr "$id") (INTERNAL, SSL)"
	else
		echo "starting $name on $(broker_addr "$id")"
	fi
	start_bg "$name" "$STRATA_BIN" broker --config "$props"
	started+=("$id")
done

for id in "${started[@]}"; do
	wait_ready "broker-$id" port_open "$(broker_port "$id")"
	# /readyz: registered in ZooKeeper, the partitions it leads open.
	wait_ready "broker-$id" broker_ready "$id"
	echo "broker-$id ready (pid $(comp_pid "broker-$id"), $(broker_addr "$id"), metrics http://$(broker_metrics_addr "$id")/metrics)"
done

# Every broker registered: the cluster's metadata lists all three. A secure
# cluster is asked on the INTERNAL listener with the admin certificate: the
# admin SCRAM user may not exist yet.
check_bs="$(bootstrap)"
check_flags=()
addr_of=broker_addr
if [ "$CLUSTER_SECURE" = 1 ]; then
	check_bs=""
	for id in "${BROKER_IDS[@]}"; do check_bs="${check_bs:+$check_bs,}$(broker_internal_addr "$id")"; done
	check_flags=(--command-config "$ADMIN_SSL_PROPS")
	addr_of=broker_internal_addr
fi
n=0
for ((i = 0; i < READY_TIMEOUT * 2; i++)); do
	out="$(timeout 10 "$STRATA_BIN" cluster --bootstrap-server "$check_bs" "${check_flags[@]}" 2>&1 || true)"
	n=0
	for id in "${BROKER_IDS[@]}"; do
		grep -qF "$($addr_of "$id")" <<<"$out" && n=$((n + 1))
	done
	[ "$n" -eq "${#BROKER_IDS[@]}" ] && break
	sleep 0.5
done
if [ "$n" -ne "${#BROKER_IDS[@]}" ]; then
	echo "$out" >&2
	die "only $n of ${#BROKER_IDS[@]} brokers registered within ${READY_TIMEOUT}s; see $CLUSTER_DIR/broker-*/broker-*.log"
fi

BS="$(bootstrap)"
metrics_urls() {
	local out="" id
	for id in "${BROKER_IDS[@]}"; do out="${out:+$out }http://$(broker_metrics_addr "$id")/metrics"; done
	echo "$out"
}
if [ "$CLUSTER_SECURE" = 1 ]; then
	# The admin SCRAM user, created (or its password set again) through the
	# INTERNAL listener, which the admin client certificate opens: that is
	# how the first user exists before any client can authenticate with
	# SCRAM. Then the EXTERNAL listener must let it in.
	"$STRATA_BIN" users create --bootstrap-server "$check_bs" --command-config "$ADMIN_SSL_PROPS" \
		--user "$ADMIN_USER" --mechanism SCRAM-SHA-512 --password-file "$ADMIN_PASSWORD_FILE" >/dev/null ||
		die "could not create the SCRAM user $ADMIN_USER through the INTERNAL listener"
	ok=0
	for ((i = 0; i < READY_TIMEOUT * 2; i++)); do
		# Each broker reads the new credential from ZooKeeper on its own.
		ok=1
		for id in "${BROKER_IDS[@]}"; do
			timeout 10 "$STRATA_BIN" cluster --bootstrap-server "$(broker_addr "$id")" --command-config "$CLIENT_PROPS" >/dev/null 2>&1 || { ok=0; break; }
		done
		[ "$ok" = 1 ] && break
		sleep 0.5
	done
	[ "$ok" = 1 ] || die "user $ADMIN_USER cannot authenticate on the EXTERNAL listeners within ${READY_TIMEOUT}s: $(timeout 10 "$STRATA_BIN" cluster --bootstrap-server "$BS" --command-config "$CLIENT_PROPS" 2>&1 | tail -3)"
	cat <<INFO

Strata local cluster is up, with TLS and SCRAM (SECURE=1). Everything
(configs, certificates, data, logs, pid files) is in
  $CLUSTER_DIR

  brokers        $BS   (EXTERNAL listener: SASL_SSL, SCRAM-SHA-512)
                 $check_bs   (INTERNAL listener: SSL, client certificate required)
  certificates   $CERTS_DIR   (CA, broker-N.pem, client-$ADMIN_USER.pem, truststore.pem)
  admin user     $ADMIN_USER, password in $ADMIN_PASSWORD_FILE
  client config  $CLIENT_PROPS   (strata --command-config)
                 $CLUSTER_DIR/kcat.conf   (kcat -F)
  zookeeper      $(zk_connect)
  minio S3 API   $(minio_endpoint)   bucket: $MINIO_BUCKET (prefix local-cluster/)
  metrics        $(metrics_urls)   (/healthz, /readyz too)
  logs           $CLUSTER_DIR/<component>/<component>.log

Create a topic, produce and consume with strata:
  ./strata topic create --bootstrap-server $BS --command-config $CLIENT_PROPS --topic demo --partitions 3 --replication-factor 3
  printf 'k1:hello\nk2:world\n' | ./strata produce --bootstrap-server $BS --command-config $CLIENT_PROPS --key-separator : demo
  ./strata consume --bootstrap-server $BS --command-config $CLIENT_PROPS --from-beginning --print-key --timeout 5s demo
Produce and consume with kcat (the same settings as -X flags, or -F $CLUSTER_DIR/kcat.conf):
  echo 'k3:from kcat' | kcat -P -b $BS -t demo -K: -X security.protocol=SASL_SSL -X sasl.mechanisms=SCRAM-SHA-512 \\
      -X sasl.username=$ADMIN_USER -X sasl.password="\$(cat $ADMIN_PASSWORD_FILE)" -X ssl.ca.location=$CERTS_DIR/truststore.pem
  kcat -F $CLUSTER_DIR/kcat.conf -C -b $BS -t demo -o beginning -e -f '%p %o %k %s\n'
More users (any authenticated client may manage users until ACLs are set):
  ./strata users create --bootstrap-server $BS --command-config $CLIENT_PROPS --user alice < alice.pw
More client certificates (same CA): ./strata certs create --dir $CERTS_DIR --client alice
Inspect:
  make cluster-status
Stop (data kept): make cluster-stop      Remove everything: make cluster-clean
INFO
	exit 0
fi
cat <<INFO

Strata local cluster is up. Everything (configs, data, logs, pid files) is in
  $CLUSTER_DIR

  brokers        $BS   (broker.id 1-3)
  zookeeper      $(zk_connect)
  minio S3 API   $(minio_endpoint)   bucket: $MINIO_BUCKET (prefix local-cluster/)
  minio console  http://127.0.0.1:$MINIO_CONSOLE_PORT   user: $MINIO_ROOT_USER   password: $MINIO_ROOT_PASSWORD
  metrics        $(metrics_urls)   (/healthz, /readyz too)
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
