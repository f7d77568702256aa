#!/usr/bin/env bash
# status.sh (make cluster-status): each component of the local cluster, up
# or down, with its pid and address, then the cluster as the brokers see it.
# Exit status 0 when everything is up, 1 otherwise.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

all_up=0
row() { # NAME ADDRESS
	local pid state note=""
	if pid="$(comp_pid "$1")"; then
		state=up
		port_open "${2##*:}" || { state=starting; note="  (process alive, port ${2##*:} not answering)"; all_up=1; }
	else
		pid=-
		state=down
		all_up=1
	fi
	printf '  %-10s %-8s pid %-8s %-20s log %s%s\n' "$1" "$state" "$pid" "$2" "$(comp_log "$1")" "$note"
}

echo "Local cluster in $CLUSTER_DIR"
[ -d "$CLUSTER_DIR" ] || echo "  (not created yet: run make cluster)"
row zookeeper "127.0.0.1:$ZK_PORT"
row minio "127.0.0.1:$MINIO_PORT"
echo "             console http://127.0.0.1:$MINIO_CONSOLE_PORT (user $MINIO_ROOT_USER, password $MINIO_ROOT_PASSWORD)"
for id in "${BROKER_IDS[@]}"; do
	row "broker-$id" "$(broker_addr "$id")"
	if comp_pid "broker-$id" >/dev/null; then
		ready="$(http_status "$(broker_metrics_port "$id")" /readyz)"
		case "$ready" in
		200) echo "             metrics http://$(broker_metrics_addr "$id")/metrics, /readyz 200 (ready)" ;;
		"") echo "             metrics http://$(broker_metrics_addr "$id")/metrics not answering"; all_up=1 ;;
		*) echo "             metrics http://$(broker_metrics_addr "$id")/metrics, /readyz $ready (not ready)"; all_up=1 ;;
		esac
	fi
	[ "$CLUSTER_SECURE" = 1 ] && echo "             INTERNAL (SSL) $(broker_internal_addr "$id"), EXTERNAL (SASL_SSL) $(broker_addr "$id")"
done

live=""
for id in "${BROKER_IDS[@]}"; do
	comp_pid "broker-$id" >/dev/null && live="${live:+$live,}$(broker_addr "$id")"
done
echo
if [ -n "$live" ]; then
	# shellcheck disable=SC2046 # client_flags is zero or two words
	echo "strata cluster --bootstrap-server $live $(client_flags)"
	timeout 15 "$STRATA_BIN" cluster --bootstrap-server "$live" $(client_flags) 2>&1 | sed 's/^/  /'
	[ "${PIPESTATUS[0]}" = 0 ] || all_up=1
else
	echo "no broker running: make cluster starts the cluster"
fi
exit $all_up
