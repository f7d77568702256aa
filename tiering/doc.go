// Package tiering moves a partition's sealed segments to object storage
// (S3, MinIO, or a local directory) and serves old offsets back from there,
// so a broker keeps hours on disk while the bucket keeps months.
//
// # Object layout
//
// Every key below is relative to the store's prefix (S3Config.Prefix, or
// the LocalStore's directory):
//
//	<topic>/<partition>/manifest                            the partition's manifest (JSON)
//	<topic>/<partition>/<base>-<epoch>-<id>.log             a segment's record batches, verbatim
//	<topic>/<partition>/<base>-<epoch>-<id>.index           its offset index (segment's format)
//	<topic>/<partition>/<base>-<epoch>-<id>.timeindex       its time index (segment's format)
//	<topic>/<partition>/<base>-<epoch>-<id>.snapshot        producer state at its NextOffset (optional)
//
// <base> is the segment's base offset in 20 digits, <epoch> the leader
// epoch of the uploader and <id> a random token: a retried or concurrent
// upload writes new objects and never overwrites one a manifest references.
//
// # Manifest
//
// The manifest (Manifest, manifest_types.go) is the source of truth for
// what of a partition is remote. It is JSON, one object, never edited in
// place:
//
//	{"version":1, "topic":"t", "topic_id":"…", "partition":0,
//	 "leader_epoch":7, "log_start_offset":120,
//	 "segments":[{"base_offset":100,"next_offset":250,"size":1048576,
//	              "max_timestamp":…, "epoch":7, "id":"9f…",
//	              "leader_epochs":[{"Epoch":7,"StartOffset":100}],
//	              "has_snapshot":true, "uploaded_at":"…"}, …],
//	 "configs":{…}, "num_partitions":3, "updated_at":"…"}
//
// DecodeManifest refuses an unknown version and validates what it reads:
// segments sorted, each non-empty, contiguous (a segment's NextOffset is the
// next one's BaseOffset), no overlap, the log start inside the remote range.
//
// CommitManifest replaces it with a read-check-conditional-put: it reads the
// stored manifest, refuses with ErrFenced a writer whose LeaderEpoch is
// lower than the stored one, refuses with ErrPreconditionFailed a writer
// whose idea of the stored version (its ETag) is stale, and then puts with
// If-Match (If-None-Match for the first manifest), so of two concurrent
// writers exactly one wins and a deposed leader never overwrites its
// successor.
//
// # Offload
//
// An Archiver runs per partition replica of a tiered topic. As leader it
// uploads sealed segments below the high watermark in offset order: the
// .log, .index and .timeindex, the producer snapshot at the segment's end if
// the partition directory holds one, and then it commits the manifest with
// the segment and its leader-epoch entries. Only then is the segment
// "uploaded": CanDeleteLocal, the segment.WithDeleteVeto of the local log,
// says true for it. A crash between the objects and the commit leaves
// objects no manifest references; the Sweeper deletes them once they are
// older than its grace period. When the store is unreachable the archiver
// retries with backoff; appends never wait for it, and nothing unuploaded is
// deleted locally meanwhile.
//
// Replicas roll segments at different offsets, so a new leader's local
// segment may begin below the remote end. The archiver then uploads the
// part of it from the remote end on, with indexes rebuilt for that slice.
//
// Remote retention (retention.ms, retention.bytes over local and remote)
// commits a manifest without the expired segments first and deletes their
// objects after; a crash in between leaves orphans for the sweeper, never a
// manifest entry without its objects.
package tiering
