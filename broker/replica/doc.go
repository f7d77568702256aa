// Package replica replicates a broker's partitions to and from the other
// brokers of the cluster, with Kafka's semantics: leader and follower
// state, the in-sync replica set (ISR), the high watermark, leader epochs
// and the truncation of a diverging suffix (KIP-101, KIP-279), and the
// purgatory where acks=all produces wait for the ISR. The wire protocol is
// the gRPC Replication service of proto/replication.proto (package
// replpb).
//
// # What it owns
//
//   - Partition (partition.go): one hosted partition's replication state.
//     While this broker leads: the ISR and its znode version, each
//     follower's log end offset and last caught-up time, the epoch start,
//     and the high watermark (kept in the segment log, raised only here
//     on a leader). ISR shrinks and expansions are written to the
//     coordinator with compare-and-set (isr.go).
//   - Manager (manager.go): applies metadata snapshots to the partitions
//     (leadership, ISR, a new leader epoch recorded in the log), runs the
//     ISR-shrink and high-watermark-checkpoint loop, the Replication
//     service (service.go: the leader's side) and one fetcher per leader
//     this broker follows (fetcher.go: the follower's side, with
//     truncation), and the produce purgatory (purgatory.go: Await).
//   - Replication throttling (throttle.go, KIP-73): the leader and the
//     follower quota (leader/follower.replication.throttled.rate, changed
//     at run time by Manager.SetThrottledRates), applied to the replicas
//     the broker marks with Partition.SetThrottled; the leader holds back
//     data for out-of-sync followers, the follower holds back its
//     PROGRESS reports while behind the high watermark.
//   - The metrics strata_broker_produce_purgatory_size,
//     strata_broker_isr_shrinks_total, strata_broker_isr_expands_total
//     and strata_replication_throttled_* (bytes_total, rate_bytes,
//     limit_bytes, holds_total; label direction).
//
// # What it needs from the broker
//
// Package broker imports this package; this package never imports
// broker. The broker provides:
//
//   - Config: broker.id, the replica.* settings, the listener for the
//     Replication service (nil on a single node), logger, metrics
//     registry, clock, and the channel closed when shutdown begins.
//   - Host (host.go): its hosted partitions (all of them, or one by topic
//     and index) and the part of coord.Coordinator used here: the
//     metadata snapshot, and reading and writing a partition's state.
//   - Appender (host.go), one per partition: the partition's append lock,
//     which every append to its log takes (produce, group commits,
//     replication), and its idempotent-producer state, updated for
//     replicated batches and rebuilt after a truncation.
//
// The Kafka API handlers stay in the broker: it checks a produce's
// min.insync.replicas against Partition.ISRSize before appending, calls
// Partition.AdvanceHighWatermark after each append it makes as leader,
// and turns Manager.Await's WaitResult into the partition's Kafka error.
//
// # Calling the manager
//
//	m := replica.NewManager(cfg, host)   // registers metrics; serves cfg.Listener if set
//	p := replica.NewPartition(topic, topicID, index, brokerID, log, appender) // as each log opens
//	m.Start()                            // ISR-shrink and checkpoint loop
//	m.Sync(snap)                         // after every metadata snapshot the broker applies
//	p.SetThrottled(leader, follower)     // as the topic's throttled-replicas configs apply
//	m.SetThrottledRates(l, f)            // a run-time change of the rates
//	p.AdvanceHighWatermark()             // after each append as leader
//	res, isr := m.Await(ctx, p, epoch, target, deadline) // acks=all
//	m.Forget(p)                          // before the partition's log is deleted
//	close(cfg.Done); m.Stop()            // shutdown
//
// # The stream
//
// A follower holds one Replicate stream to each broker that leads
// partitions it follows. Per partition:
//
//	follower                                    leader
//	   │ EpochEnds(current epoch, latest epoch) ──►│  where does that epoch end?
//	   │◄── (epoch, end offset) ───────────────────│
//	   │ truncate to the first offset where the logs may differ
//	   │ START(epoch, log end, last epoch) ───────►│  checks leadership and offset
//	   │◄── PartitionData(batches, HW, log start) ─│  pushed as the log grows,
//	   │ append verbatim (CRC checked)             │  at most streamWindow ahead
//	   │ PROGRESS(log end) ───────────────────────►│  follower's LEO: HW, ISR
//	   │   ... heartbeat PROGRESS while idle ...   │
//	   │◄── PartitionData(error code) ─────────────│  leadership moved, offset out
//	   │ truncate again, or follow the new leader  │  of range: nothing more until
//	   │ START ...                                 │  the next START
//	   │ STOP ────────────────────────────────────►│  no longer followed here
//
// # Who may call
//
// guard.go checks every call of the Replication service before it
// touches a partition: the interceptors recover a call's panic (logged
// with PanicMarker, the call ends with codes.Internal, nothing else is
// affected); a follower's messages are bounded by maxFollowerMessage (1
// MiB plus 300 bytes per partition strata.max.broker.partitions allows),
// a leader's by maxReplicationMessage (256 MiB); and a stream's first
// message (or an EpochEnds request) must name a broker other than this
// one that is registered in the coordinator's snapshot (from whatever
// address: NAT, several interfaces and proxies are normal), else the call
// ends with codes.PermissionDenied and both sides log it at WARN. This
// keeps a stray process from replicating under an id no live broker has;
// over plaintext it is not authentication: any process that can reach
// the port can claim a registered broker's id. With Config.ServerTLS and
// Config.ClientTLS the service runs mutual TLS (tls.go): a call is then
// served only if the caller's verified certificate is valid for the host
// its claimed broker id registered, and a follower verifies the leader's
// certificate for the host the leader registered.
//
// # Locks
//
// Lock order: the Appender's lock, then Partition.mu, then the segment
// log's own lock; a fetcher's lock is taken under the Appender's lock
// and never around it, and the Manager's lock (fetchers) before a
// fetcher's. A fetcher's lock may be held while Partition.mu is taken
// (the throttle check), never the other way round. A Throttle's lock is
// a leaf. No lock of this package is held across a network call.
package replica
