#!/usr/bin/env bash
# down.sh (make cluster-stop): stops the local cluster and keeps its data.
#
# Order: the brokers one at a time with controlled shutdown (each moves
# its leadership to in-sync replicas on the brokers still running; the last
# one keeps what nobody else can lead), then MinIO after the brokers' last
# uploads, then ZooKeeper. make cluster starts them again, the brokers catch
# up and the preferred leaders take their partitions back.
#
# STOP_ZK_FIRST=1 stops ZooKeeper first and then the brokers together
# (SIGTERM; SIGKILL after STOP_TIMEOUT seconds): faster, and the same
# brokers lead the same partitions after the next start.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

STOP_ZK_FIRST="${STOP_ZK_FIRST:-0}"
rc=0

stop_one() { # NAME TIMEOUT
	local pid
	pid="$(comp_pid "$1")" || return 0
	echo "stopping $1 (pid $pid)"
	stop_pid "$1" "$pid" "$2" || return 1
	rm -f "$(comp_pidfile "$1")"
}

running=0
for name in zookeeper minio broker-1 broker-2 broker-3; do
	comp_pid "$name" >/dev/null && running=$((running + 1))
done
if [ "$running" -eq 0 ]; then
	echo "nothing running in $CLUSTER_DIR"
	exit 0
fi

if [ "$STOP_ZK_FIRST" = 1 ]; then
	stop_one zookeeper 15 || rc=1
	pids=()
	for id in "${BROKER_IDS[@]}"; do
		stop_one "broker-$id" "$STOP_TIMEOUT" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	stop_one minio 15 || rc=1
else
	for ((i = ${#BROKER_IDS[@]} - 1; i >= 0; i--)); do
		stop_one "broker-${BROKER_IDS[$i]}" "$STOP_TIMEOUT" || rc=1
	done
	stop_one minio 15 || rc=1
	stop_one zookeeper 15 || rc=1
fi
[ "$rc" -eq 0 ] && echo "local cluster stopped; data kept in $CLUSTER_DIR (make cluster starts it again, make cluster-clean removes it)"
exit $rc
