#!/usr/bin/env bash
# install-test-deps.sh installs the Debian packages that Strata's end-to-end
# tests drive: kcat, python3-confluent-kafka (librdkafka 2.0.2), and strace
# (which counts the broker's fsyncs under log.flush.interval.messages=1).
#
# Idempotent and quiet: when everything is present it only asks dpkg and
# exits; otherwise it runs `apt-get update` once and installs what is
# missing. Run as root (make test does, on a clean Debian machine).
set -euo pipefail

packages=(kcat python3-confluent-kafka strace zookeeper libslf4j-java)

installed() {
	dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qx installed
}

missing=()
for p in "${packages[@]}"; do
	installed "$p" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-test-deps: missing ${missing[*]}; run as root or install them with apt-get" >&2
	exit 1
fi

echo "install-test-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for p in "${missing[@]}"; do
	installed "$p" || { echo "install-test-deps: $p did not install" >&2; exit 1; }
done
