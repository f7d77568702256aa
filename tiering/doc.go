// Package tiering moves a partition's sealed segments to object storage
// (S3, MinIO, or a local directory) and serves old offsets back from there,
// so a broker keeps hours on disk while the bucket keeps months.
//
// # Object layout
//
// Every key below is relative to the store's prefix (S3Config.Prefix, or
// the LocalStore's directory). A partition's objects live under a prefix
// that names the topic incarnation by its topic id (layout.go):
//
//	<topic>/<topic id>/<partition>/manifest                            the partition's manifest (JSON)
//	<topic>/<topic id>/<partition>/<base>-<epoch>-<id>.log             a segment's record batches, verbatim
//	<topic>/<topic id>/<partition>/<base>-<epoch>-<id>.index           its offset index (segment's format)
//	<topic>/<topic id>/<partition>/<base>-<epoch>-<id>.timeindex       its time index (segment's format)
//	<topic>/<topic id>/<partition>/<base>-<epoch>-<id>.snapshot        producer state at its NextOffset (optional)
//
// <topic id> is 8-4-4-4-12 lowercase hex digits, <base> the segment's base
// offset in 20 digits, <epoch> the leader epoch of the uploader and <id> a
// random token: a retried or concurrent upload writes new objects and never
// overwrites one a manifest references, and a topic deleted and created
// again under its name (another topic id) never shares a key with its
// predecessor, so neither the predecessor's late deletion nor its late
// archiver can reach the new topic's data.
//
// Buckets written before the topic id joined the keys hold the legacy
// layout, <topic>/<partition>/manifest and <topic>/<partition>/<base>-….
// They are read as they are (dual read, no migration): the manifest of such
// a partition says so (legacy_keys), and the partition keeps its layout for
// the rest of its topic's life. LoadManifest takes a legacy manifest only
// for the topic id it records; DeletePartition deletes a legacy directory
// only with that topic; restore lists both layouts. Why not migrate: moving
// a partition copies every object (GET and PUT; ObjectStore has no copy)
// and cannot be one atomic step, and two manifests of one partition are
// what the layout exists to prevent.
//
// # Manifest
//
// The manifest (Manifest, manifest_types.go) is the source of truth for
// what of a partition is remote. It is JSON, one object, never edited in
// place:
//
//	{"version":2, "topic":"t", "topic_id":"…", "partition":0,
//	 "leader_epoch":7, "log_start_offset":120,
//	 "segments":[{"base_offset":100,"next_offset":250,"size":1048576,
//	              "max_timestamp":…, "epoch":7, "id":"9f…",
//	              "leader_epochs":[{"Epoch":7,"StartOffset":100}],
//	              "has_snapshot":true, "uploaded_at":"…"}, …],
//	 "dropped":[{…a segment…, "dropped_at":"…"}, …],
//	 "configs":{…}, "num_partitions":3, "updated_at":"…"}
//
// with "legacy_keys":true in a manifest of the legacy layout, and
// "remote_cleaner_checkpoint":N (version 3) in one of a compacted topic
// whose remote part the remote cleaner has compacted up to N; without it
// the manifest is written as version 2, which brokers that know only
// version 2 still read. Version 1 (no legacy_keys, no dropped; always the
// legacy layout) is still read and is written back as version 2. DecodeManifest refuses an unknown version
// or field and validates what it reads: segments sorted, each non-empty,
// contiguous (a segment's NextOffset is the next one's BaseOffset), no
// overlap, the log start inside the remote range, a topic id in the
// topic-id layout, no dropped segment sharing objects with a live one.
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
// says true for it, if the manifest holds it in the segment's own
// leader-epoch lineage (lineage.go). A crash between the objects and the
// commit leaves objects no manifest references; the Sweeper deletes them
// once it has watched them unreferenced for its grace period. The archiver
// commits objects only within half the grace of starting their upload, on
// the monotonic clock (clock.go). When the store is unreachable the
// archiver retries with backoff; appends never wait for it, and nothing
// unuploaded is deleted locally meanwhile.
//
// Replicas roll segments at different offsets, so a new leader's local
// segment may begin below the remote end. The archiver then uploads the
// part of it from the remote end on, with indexes rebuilt for that slice.
//
// After an unclean leader election the new leader's log and the remote
// log part at some offset; the leader cuts the remote log there and
// continues it with its own data, and remote reads never pass the local
// log start (lineage.go, RemoteReader.ReadBelow).
//
// Remote retention (retention.ms, retention.bytes over local and remote)
// commits a manifest without the expired segments, moved to its dropped
// list; the leader deletes their objects once it has seen them dropped for
// the delete delay (file.delete.delay.ms), so a reader that resolved the
// older manifest finishes its read, and then commits a manifest without
// them. No live entry ever points at a missing object.
//
// # Compacted topics
//
// A compacted topic tiers too (compaction.go): a local segment uploads
// once the local cleaner cleaned it or its data is older than
// max.compaction.lag.ms; remote entries cover the offset gaps cleaning
// leaves, so the manifest stays contiguous; and on the leader a remote
// cleaner (remote_cleaner.go) compacts the remote log with the segment
// package's offset map and batch filter, writes replacement objects under
// new ids and swaps them in with one manifest commit, the replaced
// segments going to the dropped list like those of remote retention.
package tiering
