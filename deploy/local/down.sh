#!/usr/bin/env bash
# down.sh (make cluster-stop): stops the local cluster and keeps its data.
#
# Order. Brokers do not replicate data yet: a follower replica holds an
# empty log. If the brokers stopped one by one while ZooKeeper runs, each
# controlled shutdown (or the controller, on a broker's death) would move
# leadership to a replica that has no data, and after the next start the
# records of most partitions would not be visible (they stay on disk, but
# the broker that has them is no longer the leader). So by default
# ZooKeeper stops first: the brokers then keep the leadership and ISR that
# ZooKeeper recorded, stop together (SIGTERM; SIGKILL after STOP_TIMEOUT
# seconds), and the same brokers lead the same partitions after the next
# make cluster. MinIO stops last, after the brokers' last uploads.
#
# STOP_ZK_FIRST=0 uses the order for a replicating cluster instead: brokers
# one at a time with controlled shutdown (leadership moves to the others),
# then MinIO, then ZooKeeper.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

STOP_ZK_FIRST="${STOP_ZK_FIRST:-1}"
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
