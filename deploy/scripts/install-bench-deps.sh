#!/usr/bin/env bash
# install-bench-deps.sh installs the peer that bench/suite (make bench,
# scenario 1) compares Strata against: Debian's nats-server (JetStream) and
# natscli's `nats` command, built from the Go module proxy into
# $(go env GOPATH)/bin.
#
# Idempotent and quiet: a fast no-op when both are present. Prints the path of
# the nats binary on stdout so callers can use it without PATH changes.
set -euo pipefail

# NATSCLI_VERSION is the natscli release the benchmark was written against
# (`nats bench js pub async SUBJECT --create --storage=file ...`).
NATSCLI_VERSION=${NATSCLI_VERSION:-v0.5.0}

if ! dpkg-query -W -f='${db:Status-Status}' nats-server 2>/dev/null | grep -qx installed; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-bench-deps: nats-server missing; run as root or apt-get install nats-server" >&2
		exit 1
	fi
	echo "install-bench-deps: installing nats-server" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends nats-server >/dev/null
fi

bindir="$(go env GOBIN)"
[ -n "$bindir" ] || bindir="$(go env GOPATH)/bin"
nats="$bindir/nats"
if [ ! -x "$nats" ] || [ "$("$nats" --version 2>/dev/null)" != "$NATSCLI_VERSION" ]; then
	echo "install-bench-deps: building natscli $NATSCLI_VERSION (about a minute)" >&2
	GOBIN="$bindir" go install "github.com/nats-io/natscli/nats@$NATSCLI_VERSION" >&2
fi
echo "$nats"
