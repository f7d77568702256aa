#!/usr/bin/env bash
# run-parallel.sh runs each argument as a shell command, all at the same
# time, and prints each one's output in one piece when it ends (in the
# order they end, headed by the command and its wall time). It exits 0 when
# every command did, else 1 after naming the ones that failed.
#
# make unit uses it to run the end-to-end tests in shards beside the other
# packages: those tests mostly wait (ZooKeeper sessions, timeouts, restarts)
# and leave the CPU idle, so running them one after another is what made
# the suite long, not the work they do.
set -u
if [ $# -eq 0 ]; then
	echo "usage: run-parallel.sh 'command' ['command' ...]" >&2
	exit 2
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/strata-parallel-XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
declare -A idx_of start_of
for i in $(seq 1 $#); do
	( bash -c "${!i}" >"$dir/$i.out" 2>&1 ) &
	idx_of[$!]=$i
	start_of[$!]=$SECONDS
	echo "started: ${!i}"
done
failed=()
while [ ${#idx_of[@]} -gt 0 ]; do
	wait -n -p pid
	rc=$?
	i=${idx_of[$pid]}
	echo "=== ${!i} (exit $rc, $((SECONDS - ${start_of[$pid]})) s)"
	cat "$dir/$i.out"
	[ "$rc" = 0 ] || failed+=("${!i}")
	unset "idx_of[$pid]"
done
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[@]}"
	exit 1
fi
