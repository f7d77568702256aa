#!/usr/bin/env bash
# install-test-deps.sh installs the Debian packages that Strata's end-to-end
# tests drive: kcat, python3-confluent-kafka (librdkafka 2.0.2), strace
# (which counts the broker's fsyncs under log.flush.interval.messages=1),
# ZooKeeper, iproute2 (ip and tc, with which broker/e2e/netlab makes the
# network namespaces, bridges and links of the network fault tests),
# and mount, losetup and mkfs.ext4 (util-linux, mount, e2fsprogs: the disk
# fault tests mount a tmpfs and a failing loop device), prometheus for its
# promtool (broker/metrics_deploy_test.go checks deploy/prometheus/strata-alerts.yml
# with promtool check rules), and zsh and fish (whose syntax checks the
# shell completion test runs on `strata completion`).
#
# Idempotent and quiet: when everything is present it only asks dpkg and
# exits; otherwise it runs `apt-get update` once and installs what is
# missing. Run as root (make test does, on a clean Debian machine).
set -euo pipefail

# MinIO for the tiered-storage tests (tiering/miniotest): built once from the
# Go module proxy into $(go env GOBIN) or $(go env GOPATH)/bin, where the
# harness finds it; skipped when the binary is already there. It runs before
# the Debian packages because that part exits early when they are present.
minio_module=github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c
minio_bin="$(go env GOBIN)"
[ -n "$minio_bin" ] || minio_bin="$(go env GOPATH | cut -d: -f1)/bin"
if [ ! -x "$minio_bin/minio" ]; then
	echo "install-test-deps: building MinIO ($minio_module, about 3 minutes)" >&2
	(cd /tmp && GOFLAGS= GOBIN="$minio_bin" timeout 900 go install "$minio_module")
fi

packages=(kcat python3-confluent-kafka strace zookeeper libslf4j-java iproute2 util-linux mount e2fsprogs prometheus zsh fish)

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
# Only promtool is wanted from the prometheus package: on a machine run by
# systemd its postinst starts a Prometheus server (port 9090); stop and
# disable it. Elsewhere (containers) policy-rc.d keeps it from starting.
if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
	systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
