#!/usr/bin/env bash
# fuzz-smoke.sh BUDGET SLOW_BUDGET "SLOW_TARGETS": runs every fuzz target of
# the module (every func Fuzz* in a _test.go file) for BUDGET (a count
# such as 50000x, or a duration such as 5m); the targets named in
# SLOW_TARGETS get SLOW_BUDGET instead when BUDGET is a count.
#
# Each package's test binary is built once, with the fuzzing
# instrumentation (go test -c -fuzz=.), and runs each of its targets in
# turn from the package's directory, so its seed corpus in testdata/fuzz
# is read as go test reads it; the inputs the engine finds interesting
# are kept where go test keeps them ($GOCACHE/fuzz/<import path>). That
# saves a build and a link per target, which took longer than the
# fuzzing itself. A failing input is written to testdata/fuzz/<target>
# as go test writes it.
set -euo pipefail
budget=${1:?usage: fuzz-smoke.sh BUDGET SLOW_BUDGET SLOW_TARGETS}
slow_budget=${2:?}
slow=" ${3:-} "
GO=${GO:-go}
cache=$($GO env GOCACHE)/fuzz
bins=$(mktemp -d)
trap 'rm -rf "$bins"' EXIT

$GO list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do
	targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/func //' || true)
	[ -n "$targets" ] || continue
	bin=$bins/$(basename "$dir").test
	$GO test -c -fuzz=. -o "$bin" "$pkg"
	for t in $targets; do
		b=$budget
		case "$slow" in *" $t "*) case "$budget" in *x) b=$slow_budget ;; esac ;; esac
		echo "fuzz $pkg $t ($b)"
		(cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^$t\$" -test.fuzztime="$b" -test.fuzzcachedir="$cache/$pkg")
	done
done
