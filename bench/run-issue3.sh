#!/usr/bin/env bash
# run-issue3.sh runs the broker benchmark of issue 3 on this machine:
# franz-go against a Strata broker (produce 100 B and 1 KiB records, acks=1
# and all, no compression and lz4; consume from the page cache), NATS
# JetStream beside it (file storage, async publish, same sizes and counts) and
# the loopback TCP limit. Prints a Markdown table of figures and ratios and
# writes it to bench/results/<date>/results.md (raw figures in results.json).
#
# Usage: bench/run-issue3.sh [brokerbench flags]
#   -records100 N   records per 100 B run (default 1000000)
#   -records1k N    records per 1 KiB run (default 500000)
#   -skip-nats      leave JetStream out
# The defaults finish in a few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
nats=$(deploy/scripts/install-bench-deps.sh)
exec go run ./bench/brokerbench -nats "$nats" "$@"
