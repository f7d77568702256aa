// Package broker is Strata's Kafka protocol server: the TCP listener and its
// connections, one request handler per API key, and the partition state
// that ties the handlers to the segment logs and to the cluster metadata in
// package coord.
//
// # Framing
//
// Every request and response is a frame: a big-endian int32 size followed
// by that many bytes. Request frames larger than socket.request.max.bytes
// are refused from their size prefix, before anything is allocated, and
// the connection is closed. A frame's buffer grows as its body arrives
// (16 KiB at first, then at most 8 times the bytes read when they fill
// it), so a client that announces a large frame and sends little of it
// holds little memory.
//
//	request:  size int32 | api key int16 | api version int16 | correlation id int32
//	          | client id nullable string (int16 length)
//	          | tagged fields (uvarint count, then tag/size/bytes) -- flexible versions only
//	          | body (kmsg)
//	response: size int32 | correlation id int32
//	          | tagged fields (one 0 byte) -- flexible versions, except ApiVersions
//	          | body (kmsg, or hand-written around file ranges for Fetch)
//
// # Connections
//
// Each connection has a reader goroutine that reads and decodes frames and
// queues them (at most maxInFlight per connection), and a processor
// goroutine that handles them strictly in arrival order and writes each
// response before taking the next request, so responses leave in request
// order and produce requests on one connection are appended in order. A
// request that cannot be decoded (unknown key, unsupported version,
// malformed body) closes its connection after the requests queued before it
// are answered; ApiVersions at an unsupported version is answered with
// UNSUPPORTED_VERSION in v0 form instead, as Kafka does (KIP-511).
//
// # Decoding
//
// Bodies are decoded by kmsg, which refuses an array whose claimed length
// could not fit in the bytes left (each element needs at least its
// fewest encoded bytes), so a claim of 2^31 elements in a small frame
// fails before anything is allocated. Decoding a frame still allocates
// more than its size, since a Go element is larger than its fewest bytes
// on the wire: it never allocates more than MaxDecodeAmplification (64)
// times the frame's size. TestDecodeAllocationBound measures it for every
// API version served, with frames crafted to decode the most per byte:
// arrays of empty elements (up to 24 times; 16 for arrays of strings,
// whose header is 16 bytes against 1 on the wire) and unknown tagged
// fields, which kmsg keeps in a map (up to 54 times, the worst).
//
// # Listeners and security
//
// listeners.go binds the named listeners and carries each connection's
// listener (its name, security protocol, TLS and SASL setup);
// authenticate.go runs the TLS handshake and the SASL exchanges
// (SaslHandshake v0 raw tokens and v1, SaslAuthenticate, KIP-368
// re-authentication) and holds the connection's principal; authorize.go
// checks it against the ACLs in every handler. ssl_reload.go reloads a
// listener's certificates on an admin request.
//
// # Limits
//
// limits.go bounds what clients can make the broker hold, with Kafka's
// settings and semantics: max.connections (the accept loop waits at the
// limit), max.connections.per.ip and its overrides (a connection over its
// address's limit is closed at once), queued.max.request.bytes (the bytes
// of frames read and not yet answered, over all connections; a reader
// reserves a frame's announced size before reading its body and waits
// while none is left, KIP-72; waiting readers are served in the order
// they came). partition_limits.go bounds the partitions
// topic changes create (strata.max.partitions.per.request,
// strata.max.broker.partitions).
//
// What requests can hold follows: a connection holds at most
// maxInFlight+1 frames (queued, being handled, and the one its reader
// holds back), each decoded into at most MaxDecodeAmplification times its
// size; with queued.max.request.bytes = Q > 0, the frames held over all
// connections are at most Q + socket.request.max.bytes - 1 bytes, so
// decoded requests at most 65 times that. With Kafka's default Q = -1
// only the per-connection bound holds; an operator who must bound the
// broker's memory sets Q, and socket.request.max.bytes no larger than
// the largest request clients send. A reservation is of the size a frame
// announces, as in Kafka: a client that announces frames and sends them
// slowly holds its reservations until connections.max.idle.ms ends its
// read; max.connections.per.ip bounds how much one address can hold so.
//
// # Handlers
//
// One file per API key, named as in franz-go's kfake (00_produce.go,
// 01_fetch.go, ...), each opening with the versions it serves and its
// behavior. Each registers itself in init; ApiVersions answers from that
// registry, so an API is advertised exactly when its file is compiled in.
//
// # Consumer groups
//
// The group APIs (OffsetCommit, OffsetFetch, JoinGroup, Heartbeat,
// LeaveGroup, SyncGroup, DescribeGroups, ListGroups, DeleteGroups,
// OffsetDelete) are served by package group at the versions it lists;
// FindCoordinator names the leader of the group's partition of the
// internal topic __consumer_offsets, which loads that partition's groups
// while it leads it; group_coordinator.go says how the topic differs from
// other topics. Every request carries its connection's context (client id and
// address for the coordinator), cancelled when the connection's reader
// stops or the server shuts down: a JoinGroup or SyncGroup waiting for a
// rebalance then returns, unanswered, and the connection closes. These
// requests block their connection while they wait, as in Kafka, which
// handles one request per connection at a time.
//
// # Transactions
//
// The transaction coordinator (package txn) serves InitProducerId with a
// transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
// DescribeTransactions and ListTransactions for the transactional ids of
// the partitions of __transaction_state this broker leads
// (txn_coordinator.go loads and unloads them). Its markers go through
// writeTxnMarkers to the partitions this broker leads and through the
// Transactions gRPC service on the replication listener to the others
// (txn_markers.go), which also carries KIP-890's verification
// (txn_verify.go) from partition leaders to coordinators.
//
// # Cluster
//
// A Server is one broker of a cluster whose metadata lives in a
// coord.Coordinator (ZooKeeper with zookeeper.connect, else the embedded
// single-node coordinator): cluster.go registers the broker, runs its
// controller candidate and feeds the metadata cache; metadata_apply.go
// opens the logs of the partitions the broker is a replica of, deletes
// those of deleted topics and records each partition's leader and leader
// epoch, which the data handlers check (NOT_LEADER_OR_FOLLOWER elsewhere);
// topic_admin.go makes topic changes through the coordinator.
//
// # Replication
//
// Package replica (broker/replica) replicates partitions between brokers
// over gRPC: the leader's and follower's state, ISR, high watermark,
// leader epochs and KIP-101 truncation, the acks=all purgatory.
// replication.go wires it to the server through replica.Host and
// replica.Appender. docs/cluster.md is the operator's view.
//
// # Settings
//
// Every broker setting and topic config is one entry of the registry in
// settings.go (entries by concern in settings_broker.go, settings_log.go,
// tiering.go and metrics.go): Kafka name, type, default, scope, whether it
// can change at run time, validation and help. ConfigFromProperties,
// per-topic validation and defaults (topic_config.go), DescribeConfigs,
// the --help of strata broker and docs/configuration.md (configdoc.go)
// are all derived from it. properties.go is the one Java .properties
// reader, for the broker's config file and for meta.properties.
//
// # What stays out of this package
//
// The on-disk log, its file names, indexes and checkpoints are package
// segment's (datadir.go only adds meta.properties and partition.metadata,
// written with segment/atomicfile; logdirs.go places partition directories
// in the directories of log.dirs and takes a failed one offline); the object store and manifest are
// package tiering's (tiering.go is the glue); the group coordinator and
// the idempotent-producer state are broker/group and broker/producer.
//
// # Zero-copy fetch
//
// Fetch responses are encoded by hand (fetch_encode.go) around file ranges
// of segment files, and the ranges are sent with sendfile(2) at an explicit
// offset (sendfile_linux.go), so record bytes never enter user space. The
// Stats counter FetchZeroCopyBytes counts them.
package broker
