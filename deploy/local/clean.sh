#!/usr/bin/env bash
# clean.sh (make cluster-clean): stops the local cluster and removes its
# folder: data, logs, configs, the MinIO bucket's contents.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bash "$(dirname "${BASH_SOURCE[0]}")/down.sh"
if [ -d "$CLUSTER_DIR" ]; then
	# Guard against a CLUSTER_DIR that is not a cluster folder.
	for f in "$CLUSTER_DIR"/*; do
		case "$(basename "$f")" in
		zookeeper | minio | broker-* | bin | extra.properties | '*') ;;
		*) die "$CLUSTER_DIR holds $(basename "$f"), which the local cluster did not write; remove it by hand" ;;
		esac
	done
	rm -rf "$CLUSTER_DIR"
	echo "removed $CLUSTER_DIR"
fi
