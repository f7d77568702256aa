#!/usr/bin/env bash
# test-repeat.sh N HOG: runs `make test` N times in a row in a fresh clone
# of this repository's HEAD (committed work only), with CI=true as
# .ci/run sets it. Run number HOG (1-based; 0 for none) runs beside a CPU
# hog, `stress-ng --cpu 2` from Debian (installed if missing), so that a
# test whose verdict depends on scheduling shows itself. It stops at the
# first failing run, keeping that run's log, and prints each run's wall
# time.
#
# Usage: make test-repeat N=3 HOG=2
set -euo pipefail
n=${1:-3}
hog=${2:-2}
case "$n$hog" in *[!0-9]*) echo "test-repeat: N and HOG must be numbers (got N=$n HOG=$hog)" >&2; exit 2;; esac
[ "$n" -ge 1 ] || { echo "test-repeat: N must be at least 1" >&2; exit 2; }

repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d /tmp/strata-test-repeat.XXXXXX)
hog_pid=
stop_hog() {
	if [ -n "$hog_pid" ]; then
		kill "$hog_pid" 2>/dev/null || true
		wait "$hog_pid" 2>/dev/null || true
		hog_pid=
	fi
}
trap stop_hog EXIT

if [ "$hog" -ge 1 ] && ! command -v stress-ng >/dev/null; then
	if [ "$(id -u)" -eq 0 ]; then
		echo "test-repeat: installing stress-ng" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends stress-ng >/dev/null ||
			{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends stress-ng >/dev/null; }
	fi
	command -v stress-ng >/dev/null || { echo "test-repeat: stress-ng is missing; install it (apt-get install stress-ng)" >&2; exit 1; }
fi

git clone -q "$repo" "$work/strata"
cd "$work/strata"
beside=""
[ "$hog" -ge 1 ] && [ "$hog" -le "$n" ] && beside=", run $hog beside stress-ng --cpu 2"
echo "test-repeat: $n runs of make test in $work/strata at $(git rev-parse --short HEAD)$beside" >&2
times=()
for i in $(seq 1 "$n"); do
	log="$work/run-$i.log"
	tag=""
	if [ "$i" -eq "$hog" ]; then
		tag=" (beside stress-ng --cpu 2)"
		stress-ng --cpu 2 --timeout 2h --quiet &
		hog_pid=$!
	fi
	start=$(date +%s)
	echo "test-repeat: run $i of $n$tag, log $log" >&2
	status=0
	CI=true make test >"$log" 2>&1 || status=$?
	secs=$(($(date +%s) - start))
	stop_hog
	times+=("run $i: $((secs / 60))m$((secs % 60))s$tag")
	if [ "$status" -ne 0 ]; then
		echo "test-repeat: run $i FAILED after ${secs}s (exit $status); its log: $log" >&2
		grep -E '^(--- FAIL|FAIL|panic:)' "$log" | head -40 >&2 || true
		printf '%s\n' "${times[@]}" >&2
		exit 1
	fi
	echo "test-repeat: run $i passed in ${secs}s" >&2
done
printf 'test-repeat: %d of %d runs passed:\n' "$n" "$n"
printf '  %s\n' "${times[@]}"
rm -rf "$work"
