#!/usr/bin/env bash
# run-replay.sh runs the tiered-storage benchmark of issue 7 on this machine:
# MinIO and a Strata broker tiering to it; a topic of -bytes (default 2 GiB)
# of 1 KiB records offloaded to the bucket and trimmed from local disk; a raw
# parallel ranged GET of the same .log objects; replays from offset 0 with a
# cold and a warm chunk cache (bare Fetch and franz-go); tail-consumer
# latency alone and while a cold replay runs. Prints a Markdown table of
# figures and ratios and writes it to bench/results/<date>/replay.md (raw
# figures in replay.json).
#
# Usage: bench/run-replay.sh [replaybench flags]
#   -bytes N         bytes of record values to produce (default 2147483648;
#                    -bytes 536870912 for a quick run)
#   -get-conns N     concurrent ranged GETs of the raw limit (default 8)
#   -tail-rate N     records/s of the tail producer (default 1000)
# MinIO is found (or built once) as tiering/miniotest does: $STRATA_MINIO,
# $(go env GOPATH)/bin/minio, or minio on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./bench/replaybench "$@"
