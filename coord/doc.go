// Package coord owns cluster metadata and coordination: the cluster ID, the
// broker registry, and the topics with their IDs, partition assignments,
// partition leader state and per-topic config overrides.
//
// Everything the broker needs to know about the cluster goes through the
// Metadata interface. Two implementations sit behind it: Embedded, the
// single-node coordinator that keeps its state in one JSON file in the data
// directory (this file), and a ZooKeeper implementation (a later issue) that
// keeps the same state under a chroot, as laid out in DESIGN.md.
//
// coord knows nothing of logs: creating a topic here records that it exists;
// the broker opens its partition logs afterwards. The order matters for
// crash safety: metadata is persisted before the broker acts on it, so a
// restart finds every topic a client was told about.
//
// Embedded's file, strata-metadata.json, is replaced atomically (write a
// temporary file, fsync it, rename it over the old one, fsync the directory):
//
//	{
//	  "version": 1,
//	  "cluster_id": "<22 chars, URL-safe base64 of 16 random bytes>",
//	  "topics": {
//	    "<name>": {
//	      "id": "<UUID, 8-4-4-4-12 hex>",
//	      "partitions": [{"replicas": [0], "isr": [0], "leader": 0, "leader_epoch": 0}],
//	      "configs": {"retention.ms": "3600000"}
//	    }
//	  }
//	}
package coord
