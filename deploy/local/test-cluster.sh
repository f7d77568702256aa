#!/usr/bin/env bash
# test-cluster.sh (make test-cluster): runs the real local-cluster scripts
# end to end on free ports with a cluster folder in a temporary directory:
#   make cluster; strata cluster lists 3 brokers; each broker's /readyz is
#   200 and strata_controller_active sums to 1; a topic with 3 partitions
#   and 3 replicas; 100 lines produced and consumed back; make cluster-status
#   exits 0; make cluster again is harmless; make cluster-stop leaves nothing
#   listening on the cluster's ports.
# Then a SECURE=1 pass in a second cluster folder: make cluster SECURE=1;
#   a topic created, 100 lines produced and consumed with the CLI and 50
#   with kcat through the EXTERNAL SASL_SSL listener (SCRAM-SHA-512, the
#   generated client.properties and kcat.conf); ACLs are on: a SCRAM user
#   without ACLs is refused until strata acl add grants it WRITE;
#   make cluster-stop.
# Every step is bounded by timeout; a trap stops the cluster and removes the
# temporary directory however the script ends. Exit status 0 when all pass.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
MAKE="${MAKE:-make}"
# The inner makes must see only the settings below, not variables given on
# the outer make's command line (make test-cluster ZK_PORT=...).
unset MAKEFLAGS MFLAGS MAKEOVERRIDES
STRATA="$ROOT/strata"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/strata-test-cluster.XXXXXX")"
export CLUSTER_DIR="$TMP/cluster"

fail() {
	echo "test-cluster: FAIL: $*" >&2
	exit 1
}

# port_free PORT: nothing listens on PORT (any address).
port_free() {
	! ss -Hltn "sport = :$1" 2>/dev/null | grep -q . &&
		! timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# free_range N: prints a port P such that P..P+N-1 are all free.
free_range() {
	local n="$1" p i ok try
	for ((try = 0; try < 200; try++)); do
		# Below Linux's ephemeral range (32768-60999 by default), so that
		# an outgoing connection does not take a port after the check.
		p=$((20000 + RANDOM % 12000))
		ok=1
		for ((i = 0; i < n; i++)); do
			port_free $((p + i)) || { ok=0; break; }
		done
		[ "$ok" = 1 ] && { echo "$p"; return 0; }
	done
	return 1
}

# Three consecutive free ports for ZooKeeper, MinIO API and MinIO console,
# three more, elsewhere, for the brokers.
base="$(free_range 3)" || fail "no free ports for ZooKeeper and MinIO"
export ZK_PORT="$base" MINIO_PORT=$((base + 1)) MINIO_CONSOLE_PORT=$((base + 2))
for ((t = 0; t < 50; t++)); do
	b="$(free_range 3)" || fail "no free ports for the brokers"
	# Do not overlap the range above.
	if [ "$b" -gt $((base + 2)) ] || [ $((b + 2)) -lt "$base" ]; then break; fi
done
export BROKER_BASE_PORT="$b"
# Three more for the brokers' metrics.listener, overlapping neither.
for ((t = 0; t < 50; t++)); do
	m="$(free_range 3)" || fail "no free ports for the metrics listeners"
	ok=1
	for p in "$ZK_PORT" "$MINIO_PORT" "$MINIO_CONSOLE_PORT" "$b" $((b + 1)) $((b + 2)); do
		[ "$p" -ge "$m" ] && [ "$p" -le $((m + 2)) ] && ok=0
	done
	[ "$ok" = 1 ] && break
done
export METRICS_BASE_PORT="$m"
PORTS=("$ZK_PORT" "$MINIO_PORT" "$MINIO_CONSOLE_PORT" "$b" $((b + 1)) $((b + 2)) "$m" $((m + 1)) $((m + 2)))
BS="127.0.0.1:$b,127.0.0.1:$((b + 1)),127.0.0.1:$((b + 2))"
export READY_TIMEOUT="${READY_TIMEOUT:-60}"

cleanup() {
	local rc=$? dir
	for dir in "$TMP/cluster" "$TMP/secure"; do
		[ -d "$dir" ] || continue
		CLUSTER_DIR="$dir" timeout 90 "$MAKE" --no-print-directory -C "$ROOT" cluster-stop >/dev/null 2>&1 || true
		if [ "$rc" -ne 0 ]; then
			for f in "$dir"/*/*.log; do
				[ -f "$f" ] && { echo "--- last lines of $f:" >&2; tail -n 15 "$f" >&2; }
			done
		fi
	done
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { echo "=== $(date -u +%H:%M:%S) $*"; }
START=$SECONDS

echo "test-cluster: CLUSTER_DIR=$CLUSTER_DIR ZK_PORT=$ZK_PORT MINIO_PORT=$MINIO_PORT MINIO_CONSOLE_PORT=$MINIO_CONSOLE_PORT BROKER_BASE_PORT=$BROKER_BASE_PORT"

step "make cluster"
timeout 180 "$MAKE" --no-print-directory cluster || fail "make cluster"

step "strata cluster lists 3 brokers"
out="$(timeout 20 "$STRATA" cluster --bootstrap-server "$BS")" || fail "strata cluster: $out"
echo "$out"
for ((i = 0; i < 3; i++)); do
	grep -qF "127.0.0.1:$((b + i))" <<<"$out" || fail "broker 127.0.0.1:$((b + i)) missing from strata cluster"
done

step "each broker's /readyz answers 200 and /metrics names the broker's metrics"
http_get() { # PORT PATH: the raw HTTP response
	timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET %s HTTP/1.0\r\n\r\n" "$2" >&3 && cat <&3' _ "$1" "$2"
}
for ((i = 0; i < 3; i++)); do
	code="$(http_get $((m + i)) /readyz | head -n 1 | awk '{print $2}')"
	[ "$code" = 200 ] || fail "broker on metrics port $((m + i)): /readyz answered '$code', not 200"
done
# One controller: the sum over the brokers settles at 1 (bounded wait: an
# election may be under way).
active=""
for ((t = 0; t < 60; t++)); do
	active=0
	for ((i = 0; i < 3; i++)); do
		v="$(http_get $((m + i)) /metrics | awk '$1 == "strata_controller_active" {print $2}')"
		[ -n "$v" ] || fail "metrics port $((m + i)): no strata_controller_active in /metrics"
		active=$((active + v))
	done
	[ "$active" = 1 ] && break
	sleep 0.5
done
[ "$active" = 1 ] || fail "strata_controller_active sums to $active over the brokers, want 1"

step "create topic t (3 partitions, RF 3)"
timeout 30 "$STRATA" topic create --bootstrap-server "$BS" --topic t --partitions 3 --replication-factor 3 ||
	fail "topic create"

step "produce 100 lines"
seq -f 'line-%g' 1 100 >"$TMP/in.txt"
timeout 60 "$STRATA" produce --bootstrap-server "$BS" --file "$TMP/in.txt" t || fail "produce"

step "consume 100 lines from the beginning"
timeout 60 "$STRATA" consume --bootstrap-server "$BS" --from-beginning --max-messages 100 --timeout 20s t \
	>"$TMP/out.txt" || fail "consume"
sort "$TMP/in.txt" >"$TMP/in.sorted"
sort "$TMP/out.txt" >"$TMP/out.sorted"
cmp -s "$TMP/in.sorted" "$TMP/out.sorted" ||
	fail "consumed $(wc -l <"$TMP/out.txt") lines, not the 100 produced: $(diff "$TMP/in.sorted" "$TMP/out.sorted" | head -5)"

step "make cluster-status exits 0"
timeout 60 "$MAKE" --no-print-directory cluster-status || fail "make cluster-status"

step "make cluster again is harmless"
out="$(timeout 120 "$MAKE" --no-print-directory cluster 2>&1)" || { echo "$out"; fail "second make cluster"; }
echo "$out" | grep -E 'already running|cluster is up'
n="$(grep -c 'already running' <<<"$out" || true)"
[ "$n" -eq 5 ] || fail "second make cluster: $n of 5 components reported already running"
timeout 60 "$STRATA" consume --bootstrap-server "$BS" --from-beginning --max-messages 100 --timeout 20s t \
	>"$TMP/out2.txt" || fail "consume after second make cluster"
[ "$(wc -l <"$TMP/out2.txt")" -eq 100 ] || fail "after second make cluster: $(wc -l <"$TMP/out2.txt") lines, not 100"

step "make cluster-stop"
timeout 120 "$MAKE" --no-print-directory cluster-stop || fail "make cluster-stop"
for p in "${PORTS[@]}"; do
	port_free "$p" || fail "port $p still has a listener after make cluster-stop: $(ss -Hltnp "sport = :$p")"
done

echo "test-cluster: plain cluster passed in $((SECONDS - START))s"

# --- SECURE=1 ----------------------------------------------------------------
SSTART=$SECONDS
export CLUSTER_DIR="$TMP/secure"
for ((t = 0; t < 50; t++)); do
	ib="$(free_range 3)" || fail "no free ports for the INTERNAL listeners"
	ok=1
	for p in "${PORTS[@]}"; do
		[ "$p" -ge "$ib" ] && [ "$p" -le $((ib + 2)) ] && ok=0
	done
	[ "$ok" = 1 ] && break
done
export BROKER_INTERNAL_BASE_PORT="$ib"
PORTS+=("$ib" $((ib + 1)) $((ib + 2)))
CP="$CLUSTER_DIR/client.properties"

step "make cluster SECURE=1 (INTERNAL SSL on $ib-$((ib + 2)), EXTERNAL SASL_SSL on $b-$((b + 2)))"
timeout 180 "$MAKE" --no-print-directory cluster SECURE=1 >"$TMP/secure-up.txt" 2>&1 || { cat "$TMP/secure-up.txt"; fail "make cluster SECURE=1"; }
grep -E 'cluster is up|client config' "$TMP/secure-up.txt"
grep -q '^security.protocol=SASL_SSL$' "$CP" || fail "$CP: no security.protocol=SASL_SSL"

step "SASL_SSL: create topic s, produce and consume 100 lines with strata --command-config"
timeout 30 "$STRATA" topic create --bootstrap-server "$BS" --command-config "$CP" --topic s --partitions 3 --replication-factor 3 ||
	fail "topic create over SASL_SSL"
timeout 60 "$STRATA" produce --bootstrap-server "$BS" --command-config "$CP" --file "$TMP/in.txt" s || fail "produce over SASL_SSL"
timeout 60 "$STRATA" consume --bootstrap-server "$BS" --command-config "$CP" --from-beginning --max-messages 100 --timeout 20s s \
	>"$TMP/sout.txt" || fail "consume over SASL_SSL"
sort "$TMP/sout.txt" | cmp -s "$TMP/in.sorted" - || fail "SASL_SSL: consumed $(wc -l <"$TMP/sout.txt") lines, not the 100 produced"

step "SASL_SSL: produce 50 lines with kcat -X ..., consume all 150 with kcat -F kcat.conf"
seq -f 'kcat-%g' 1 50 >"$TMP/kin.txt"
timeout 30 kcat -P -b "$BS" -t s -X security.protocol=SASL_SSL -X sasl.mechanisms=SCRAM-SHA-512 \
	-X sasl.username=admin -X sasl.password="$(head -n 1 "$CLUSTER_DIR/admin.password")" \
	-X ssl.ca.location="$CLUSTER_DIR/certs/truststore.pem" <"$TMP/kin.txt" || fail "kcat produce over SASL_SSL"
timeout 30 kcat -F "$CLUSTER_DIR/kcat.conf" -C -b "$BS" -t s -o beginning -e -q -c 150 >"$TMP/kout.txt" ||
	fail "kcat consume over SASL_SSL"
sort "$TMP/in.txt" "$TMP/kin.txt" >"$TMP/all.sorted"
sort "$TMP/kout.txt" | cmp -s "$TMP/all.sorted" - ||
	fail "kcat consumed $(wc -l <"$TMP/kout.txt") lines, not the 150 produced: $(sort "$TMP/kout.txt" | diff "$TMP/all.sorted" - | head -5)"

step "ACLs: SCRAM user alice without ACLs is refused (TOPIC_AUTHORIZATION_FAILED); strata acl add lets her produce"
STRATA_PASSWORD=alice-secret timeout 30 "$STRATA" users create --bootstrap-server "$BS" --command-config "$CP" --user alice ||
	fail "users create alice"
alice=(--bootstrap-server "$BS" --command-config "$CP" --sasl-username alice)
if echo denied | STRATA_SASL_PASSWORD=alice-secret timeout 60 "$STRATA" produce "${alice[@]}" s >"$TMP/alice-out.txt" 2>&1; then
	fail "alice produced to s without an ACL"
fi
grep -qi 'authoriz' "$TMP/alice-out.txt" || fail "alice's refused produce does not say why: $(head -5 "$TMP/alice-out.txt")"
timeout 30 "$STRATA" acl add --bootstrap-server "$BS" --command-config "$CP" --allow-principal User:alice --operation Write --topic s ||
	fail "acl add"
ok=0
for ((t = 0; t < 20; t++)); do # every broker enforces it within a second; bounded retries
	if echo allowed | STRATA_SASL_PASSWORD=alice-secret timeout 60 "$STRATA" produce "${alice[@]}" s >"$TMP/alice-out.txt" 2>&1; then
		ok=1
		break
	fi
	sleep 0.5
done
[ "$ok" = 1 ] || fail "alice cannot produce to s after acl add: $(head -5 "$TMP/alice-out.txt")"

step "make cluster-stop (SECURE=1 cluster)"
timeout 120 "$MAKE" --no-print-directory cluster-stop || fail "make cluster-stop (secure)"
for p in "${PORTS[@]}"; do
	port_free "$p" || fail "port $p still has a listener after make cluster-stop: $(ss -Hltnp "sport = :$p")"
done
echo "test-cluster: SECURE=1 cluster passed in $((SECONDS - SSTART))s"
echo "test-cluster: PASS in $((SECONDS - START))s"
