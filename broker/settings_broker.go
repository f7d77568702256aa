package broker

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/coord"
)

// brokerSettings are the broker's own settings: identity, listeners, data
// directory, requests and connections.
var brokerSettings = []setting{
	{name: "broker.id", typ: typeLong, def: "0", valid: between(0, math.MaxInt32),
		field: func(c *Config) any { return &c.BrokerID },
		doc:   "This broker's id."},
	{name: "listeners", typ: typeList, def: "PLAINTEXT://127.0.0.1:9092",
		set:   setListeners,
		value: func(c *Config) string { return formatListenerList(c.Listeners) },
		doc:   "The listeners to bind, NAME://host:port comma-separated (INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9092); each name has a security protocol in listener.security.protocol.map. An empty or 0.0.0.0 host binds every interface; port 0 picks a free port."},
	{name: "advertised.listeners", typ: typeList, unset: "the listeners, a wildcard host replaced by the machine's host name",
		set:   setAdvertisedListeners,
		value: func(c *Config) string { return formatListenerList(c.AdvertisedListeners) },
		doc:   "What clients connecting on each listener are told to connect to, NAME://host:port comma-separated, names from listeners; port 0 is the bound port. Metadata answers a client with every broker's address on the listener the client came in on."},
	{name: "listener.security.protocol.map", typ: typeList, def: "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
		set: setProtocolMap, value: protocolMapValue,
		doc: "Each listener name's security protocol, NAME:PROTOCOL comma-separated; the protocols are PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL."},
	{name: "inter.broker.listener.name", typ: typeString, unset: "the listener named by security.inter.broker.protocol, or the only listener",
		set:   setInterBrokerListener,
		value: func(c *Config) string { return c.InterBrokerListener },
		doc:   "The listener other brokers use to reach this one; its advertised host is also where they reach replication.port. Not with security.inter.broker.protocol."},
	{name: "security.inter.broker.protocol", typ: typeString, def: "PLAINTEXT", enum: []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"},
		field: func(c *Config) any { return (*string)(&c.InterBrokerProtocol) },
		doc:   "Names the inter-broker listener by its name (the listener called PLAINTEXT, SSL, ...) when inter.broker.listener.name is not set. Not with inter.broker.listener.name."},
	// log.dir comes before log.dirs: when both are given, log.dirs wins.
	{name: "log.dir", typ: typeString, unset: "log.dirs applies",
		set: setLogDir, value: logDirsValue,
		doc: "The data directory, if log.dirs is not set."},
	{name: "log.dirs", typ: typeString, def: "./data",
		set: setLogDirs, value: logDirsValue,
		doc: "The data directories, comma-separated (JBOD): a new partition goes to the one holding the fewest partitions; a directory whose disk fails goes offline while the others keep serving."},
	{name: "auto.create.topics.enable", typ: typeBoolean, def: "true",
		field: func(c *Config) any { return &c.AutoCreateTopics },
		doc:   "Create unknown topics on Metadata and Produce."},
	{name: "num.partitions", typ: typeLong, def: "1", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.NumPartitions },
		doc:   "Partitions of auto-created topics, and of CreateTopics asking for -1."},
	{name: "default.replication.factor", typ: typeLong, def: "1", valid: between(1, math.MaxInt16),
		field: func(c *Config) any { return &c.DefaultReplicationFactor },
		doc:   "Replication factor of auto-created topics, and of CreateTopics asking for -1."},
	{name: "socket.request.max.bytes", typ: typeLong, def: "104857600", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.SocketRequestMaxBytes },
		doc:   "Largest request frame accepted."},
	{name: "max.connections", typ: typeInt, def: strconv.Itoa(math.MaxInt32), valid: between(0, math.MaxInt32),
		field: func(c *Config) any { return &c.MaxConnections },
		doc:   "Most client connections open at once; at the limit the broker stops accepting (new connections wait in the listen backlog) until one closes."},
	{name: "max.connections.per.ip", typ: typeInt, def: strconv.Itoa(math.MaxInt32), valid: between(0, math.MaxInt32),
		field: func(c *Config) any { return &c.MaxConnectionsPerIP },
		doc:   "Most connections from one IP address; a new connection over the limit is closed at once. 0 only with max.connections.per.ip.overrides."},
	{name: "max.connections.per.ip.overrides", typ: typeString, unset: "none",
		set: setPerIPOverrides, value: perIPOverridesValue,
		doc: "Limits that replace max.connections.per.ip for some addresses: host:count,host:count with IP addresses or hostnames (resolved when the broker starts)."},
	{name: "quota.window.num", typ: typeInt, def: "11", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.QuotaWindowNum },
		doc:   "Samples a client quota's rate (producer_byte_rate, consumer_byte_rate, request_percentage) is measured over, each quota.window.size.seconds long (docs/quotas.md)."},
	{name: "quota.window.size.seconds", typ: typeInt, def: "1", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.QuotaWindowSizeSeconds },
		doc:   "Length of one sample of the client quotas' rates, in seconds."},
	{name: "queued.max.request.bytes", typ: typeLong, def: "-1",
		field: func(c *Config) any { return &c.QueuedMaxRequestBytes },
		doc:   "Bytes of requests read but not yet answered, over all connections, beyond which no more requests are read until some are answered; -1 (or 0) for no bound, else at least socket.request.max.bytes."},
	{name: "strata.max.partitions.per.request", typ: typeInt, def: "10000", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.MaxPartitionsPerRequest },
		doc:   "Most partitions one CreateTopics or CreatePartitions request may create, over all its topics (POLICY_VIOLATION beyond)."},
	{name: "strata.max.broker.partitions", typ: typeInt, def: "4000", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.MaxBrokerPartitions },
		doc:   "Most partition replicas a broker may host; a topic creation or partition addition that would put more on any broker is refused (POLICY_VIOLATION)."},
	{name: "connections.max.idle.ms", typ: typeLong, def: "600000", valid: between(1, maxMs),
		field: func(c *Config) any { return &c.ConnectionsMaxIdle }, unit: time.Millisecond,
		doc: "Idle connections are closed after this long."},
	{name: "connections.max.reauth.ms", typ: typeLong, def: "0", valid: between(0, maxMs), perListener: true,
		field: func(c *Config) any { return &c.ConnectionsMaxReauth }, unit: time.Millisecond,
		doc: "On SASL listeners, how long an authentication lasts: the client must re-authenticate on the connection before that (KIP-368), or its next request closes it; a credential that ends sooner (an OAUTHBEARER token) ends the session sooner. 0: sessions do not end."},
	{name: "connection.failed.authentication.delay.ms", typ: typeLong, def: "100", valid: between(0, maxMs),
		field: func(c *Config) any { return &c.FailedAuthenticationDelay }, unit: time.Millisecond,
		doc: "How long a connection that failed to authenticate is held before it is closed, so clients retrying a wrong credential are slowed down; less than connections.max.idle.ms."},
	{name: "log.retention.check.interval.ms", typ: typeLong, def: "300000", valid: between(1, maxMs),
		field: func(c *Config) any { return &c.RetentionCheckInterval }, unit: time.Millisecond,
		doc: "How often retention runs."},
	{name: "num.network.threads", typ: typeLong, unset: "none", valid: between(1, math.MaxInt32),
		doc: "Accepted for compatibility; no effect (Go schedules connections)."},
	{name: "num.io.threads", typ: typeLong, unset: "none", valid: between(1, math.MaxInt32),
		doc: "Accepted for compatibility; no effect (Go schedules requests)."},
	{name: "strata.fetch.zero.copy", typ: typeBoolean, def: strconv.FormatBool(defaultZeroCopy),
		field: func(c *Config) any { return &c.ZeroCopy },
		doc:   "Send fetched records with sendfile; false copies them through user space, for benchmarks."},
}

// clusterSettings are the settings of coordination and replication:
// ZooKeeper, rack, the replication listener, the ISR, the controller.
var clusterSettings = []setting{
	{name: "zookeeper.connect", typ: typeString, def: "", check: checkZooKeeperConnect,
		field: func(c *Config) any { return &c.ZooKeeperConnect },
		doc:   "host:port[,host:port...][/chroot] of the ZooKeeper ensemble that holds the cluster's metadata (chroot " + coord.DefaultChroot + " if none is given); empty runs a single node with the embedded coordinator."},
	{name: "zookeeper.session.timeout.ms", typ: typeInt, def: "18000", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.ZooKeeperSessionTimeout }, unit: time.Millisecond,
		doc: "A broker ZooKeeper does not hear from this long is dead to the cluster and its partitions get new leaders."},
	{name: "zookeeper.connection.timeout.ms", typ: typeInt, unset: "zookeeper.session.timeout.ms applies", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.ZooKeeperConnectionTimeout }, unit: time.Millisecond,
		doc: "How long the broker waits at start for its ZooKeeper session."},
	{name: "broker.rack", typ: typeString, unset: "none",
		field: func(c *Config) any { return &c.Rack },
		doc:   "This broker's rack; replicas of a partition are spread over racks (all brokers or none must have one)."},
	{name: "replication.port", typ: typeInt, def: "0", valid: between(0, 65535),
		field: func(c *Config) any { return &c.ReplicationPort },
		doc:   "Port of the broker-to-broker replication listener (gRPC), bound on the inter-broker listener's host and reached at its advertised host, published in ZooKeeper; over mutual TLS when that listener runs TLS; 0 picks a free port. Only brokers with zookeeper.connect listen."},
	{name: "replica.lag.time.max.ms", typ: typeLong, def: "30000", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.ReplicaLagTimeMax }, unit: time.Millisecond,
		doc: "A follower that has not caught up with the leader for this long leaves the ISR."},
	{name: "replica.fetch.max.bytes", typ: typeInt, def: "1048576", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.ReplicaFetchMaxBytes },
		doc:   "Most bytes a leader sends a follower for one partition at a time (at least one batch)."},
	{name: "replica.fetch.backoff.ms", typ: typeInt, def: "1000", valid: between(0, math.MaxInt32),
		field: func(c *Config) any { return &c.ReplicaFetchBackoff }, unit: time.Millisecond,
		doc: "A follower's wait before retrying after a replication error."},
	{name: "replica.high.watermark.checkpoint.interval.ms", typ: typeLong, def: "5000", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.HWCheckpointInterval }, unit: time.Millisecond,
		doc: "How often each partition's high watermark is written to disk."},
	{name: "controlled.shutdown.enable", typ: typeBoolean, def: "true",
		field: func(c *Config) any { return &c.ControlledShutdown },
		doc:   "On SIGTERM, move this broker's partition leadership to other replicas before exiting."},
	{name: "auto.leader.rebalance.enable", typ: typeBoolean, def: "true",
		field: func(c *Config) any { return &c.AutoLeaderRebalance },
		doc:   "Move leadership back to a partition's preferred replica when it is live and in sync again."},
	{name: "offsets.topic.replication.factor", typ: typeShort, def: "3", valid: between(1, math.MaxInt16),
		field: func(c *Config) any { return &c.OffsetsTopicReplicationFactor },
		doc:   "Replicas of __consumer_offsets when it is created, capped at the live brokers."},
	{name: "offsets.topic.segment.bytes", typ: typeInt, def: "104857600", valid: between(14, math.MaxInt32),
		field: func(c *Config) any { return &c.OffsetsTopicSegmentBytes },
		doc:   "segment.bytes of __consumer_offsets when it is created; the active segment is never compacted, so a coordinator taking over replays up to this much beyond one record per key."},
	{name: "transaction.state.log.num.partitions", typ: typeInt, def: "50", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Transactions.StateLogNumPartitions },
		doc:   "Partitions of __transaction_state when it is created; an existing topic keeps its count."},
	{name: "transaction.state.log.replication.factor", typ: typeShort, def: "3", valid: between(1, math.MaxInt16),
		field: func(c *Config) any { return &c.Transactions.StateLogReplicationFactor },
		doc:   "Replicas of __transaction_state when it is created, capped at the live brokers."},
	{name: "transaction.state.log.min.isr", typ: typeInt, def: "2", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Transactions.StateLogMinISR },
		doc:   "min.insync.replicas of __transaction_state when it is created, capped at its replicas; a coordinator write needs that many in-sync replicas."},
	{name: "transaction.state.log.segment.bytes", typ: typeInt, def: "104857600", valid: between(14, math.MaxInt32),
		field: func(c *Config) any { return &c.Transactions.StateLogSegmentBytes },
		doc:   "segment.bytes of __transaction_state when it is created."},
	{name: "transaction.max.timeout.ms", typ: typeInt, def: "900000", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Transactions.MaxTimeout }, unit: time.Millisecond,
		doc: "Longest transaction timeout a producer may ask for (InitProducerId); a longer one gets INVALID_TRANSACTION_TIMEOUT."},
	{name: "transactional.id.expiration.ms", typ: typeInt, def: "604800000", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Transactions.IDExpiration }, unit: time.Millisecond,
		doc: "A transactional id with no open transaction and no update for this long is removed (a tombstone in __transaction_state)."},
	{name: "strata.transaction.end.wait.ms", typ: typeInt, def: "100", valid: between(0, 60_000),
		field: func(c *Config) any { return &c.Transactions.EndWait }, unit: time.Millisecond,
		doc: "How long EndTxn, once the commit or abort is decided and stored, waits for the transaction to complete (markers written, completion stored) before answering, so the producer's next transaction starts at once instead of retrying on CONCURRENT_TRANSACTIONS. 0 answers at once, as Kafka does."},
	{name: "transaction.partition.verification.enable", typ: typeBoolean, def: "true",
		field: func(c *Config) any { return &c.Transactions.PartitionVerification },
		doc:   "A partition leader asks the transaction coordinator whether a producer's first transactional batch belongs to an open transaction that includes the partition before appending it (KIP-890); off, it appends without asking, as before KIP-890."},
	{name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", typ: typeInt, def: "10000", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Transactions.AbortInterval }, unit: time.Millisecond,
		doc: "How often the coordinator aborts the transactions older than their timeout (bumping the producer epoch, which fences the producer)."},
	{name: "transaction.remove.expired.transaction.cleanup.interval.ms", typ: typeInt, def: "3600000", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Transactions.RemoveExpiredInterval }, unit: time.Millisecond,
		doc: "How often the coordinator removes expired transactional ids (transactional.id.expiration.ms)."},
}

// groupDefaults are package group's defaults of the group coordinator.
var groupDefaults = group.DefaultConfig()

// groupSettings are the consumer group coordinator's settings
// (Config.Groups).
var groupSettings = []setting{
	{name: "offsets.topic.num.partitions", typ: typeInt, def: strconv.Itoa(groupDefaults.NumPartitions), valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Groups.NumPartitions },
		doc:   "Partitions of __consumer_offsets when it is created; an existing topic keeps its count."},
	{name: "group.initial.rebalance.delay.ms", typ: typeInt, def: msString(groupDefaults.InitialRebalanceDelay), valid: between(0, math.MaxInt32),
		field: func(c *Config) any { return &c.Groups.InitialRebalanceDelay }, unit: time.Millisecond,
		doc: "How long the first rebalance of an empty group waits for more members."},
	{name: "group.min.session.timeout.ms", typ: typeInt, def: msString(groupDefaults.MinSessionTimeout), valid: between(0, math.MaxInt32),
		field: func(c *Config) any { return &c.Groups.MinSessionTimeout }, unit: time.Millisecond,
		doc: "Shortest session timeout a group member may ask for; at most group.max.session.timeout.ms."},
	{name: "group.max.session.timeout.ms", typ: typeInt, def: msString(groupDefaults.MaxSessionTimeout), valid: between(0, math.MaxInt32),
		field: func(c *Config) any { return &c.Groups.MaxSessionTimeout }, unit: time.Millisecond,
		doc: "Longest session timeout a group member may ask for."},
	{name: "offsets.retention.minutes", typ: typeInt, def: strconv.FormatInt(int64(groupDefaults.OffsetsRetention/time.Minute), 10), valid: between(1, math.MaxInt64/int64(time.Minute)),
		field: func(c *Config) any { return &c.Groups.OffsetsRetention }, unit: time.Minute,
		doc: "Committed offsets of a group that has been empty this long (of a group that only commits, without members: this long after each commit) are deleted, tombstones written to __consumer_offsets; an empty group left without offsets goes with them."},
	{name: "offsets.retention.check.interval.ms", typ: typeLong, def: msString(groupDefaults.OffsetsRetentionCheckInterval), valid: between(1, maxMs),
		field: func(c *Config) any { return &c.Groups.OffsetsRetentionCheckInterval }, unit: time.Millisecond,
		doc: "How often expired committed offsets are looked for (offsets.retention.minutes)."},
	{name: "offset.metadata.max.bytes", typ: typeInt, def: strconv.Itoa(groupDefaults.OffsetMetadataMaxBytes), valid: between(0, math.MaxInt16),
		field: func(c *Config) any { return &c.Groups.OffsetMetadataMaxBytes },
		doc:   "Longest metadata a committed offset may carry."},
	{name: "group.coordinator.rebalance.protocols", typ: typeList, def: "classic,consumer",
		set: setRebalanceProtocols, value: rebalanceProtocolsValue,
		doc: "The group protocols served: classic (JoinGroup, SyncGroup, ...) always; consumer (KIP-848's ConsumerGroupHeartbeat) when listed."},
	{name: "group.consumer.session.timeout.ms", typ: typeInt, def: msString(groupDefaults.Consumer.SessionTimeout), valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Groups.Consumer.SessionTimeout }, unit: time.Millisecond,
		doc: "A consumer group member (KIP-848) whose heartbeats stop this long is removed and its partitions reassigned."},
	{name: "group.consumer.min.session.timeout.ms", typ: typeInt, def: msString(groupDefaults.Consumer.MinSessionTimeout), valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Groups.Consumer.MinSessionTimeout }, unit: time.Millisecond,
		doc: "Lowest group.consumer.session.timeout.ms, of the broker or of a group."},
	{name: "group.consumer.max.session.timeout.ms", typ: typeInt, def: msString(groupDefaults.Consumer.MaxSessionTimeout), valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Groups.Consumer.MaxSessionTimeout }, unit: time.Millisecond,
		doc: "Highest group.consumer.session.timeout.ms, of the broker or of a group."},
	{name: "group.consumer.heartbeat.interval.ms", typ: typeInt, def: msString(groupDefaults.Consumer.HeartbeatInterval), valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Groups.Consumer.HeartbeatInterval }, unit: time.Millisecond,
		doc: "How often consumer group members (KIP-848) are told to heartbeat; below the session timeout."},
	{name: "group.consumer.min.heartbeat.interval.ms", typ: typeInt, def: msString(groupDefaults.Consumer.MinHeartbeatInterval), valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Groups.Consumer.MinHeartbeatInterval }, unit: time.Millisecond,
		doc: "Lowest group.consumer.heartbeat.interval.ms, of the broker or of a group."},
	{name: "group.consumer.max.heartbeat.interval.ms", typ: typeInt, def: msString(groupDefaults.Consumer.MaxHeartbeatInterval), valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Groups.Consumer.MaxHeartbeatInterval }, unit: time.Millisecond,
		doc: "Highest group.consumer.heartbeat.interval.ms, of the broker or of a group."},
	{name: "group.consumer.max.size", typ: typeInt, def: strconv.Itoa(groupDefaults.Consumer.MaxSize), valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Groups.Consumer.MaxSize },
		doc:   "Most members of one consumer group (KIP-848); a member joining beyond it gets GROUP_MAX_SIZE_REACHED."},
	{name: "group.consumer.assignors", typ: typeList, def: strings.Join(groupDefaults.Consumer.Assignors, ","),
		set: setConsumerAssignors, value: func(c *Config) string { return strings.Join(c.Groups.Consumer.Assignors, ",") },
		doc: "The server-side assignors of consumer groups (uniform, range; Kafka's class names are accepted too); a member names one with ServerAssignor, and the first listed serves the groups whose members name none."},
	{name: "group.consumer.migration.policy", typ: typeString, def: groupDefaults.Consumer.MigrationPolicy, enum: []string{"bidirectional", "upgrade", "downgrade", "disabled"},
		field: func(c *Config) any { return &c.Groups.Consumer.MigrationPolicy },
		doc:   "Online migration between classic and consumer groups with members, as Kafka 4.0: bidirectional, upgrade (classic to consumer only), downgrade (consumer to classic only) or disabled. An empty group converts under every policy, keeping its offsets."},
}

// setRebalanceProtocols reads group.coordinator.rebalance.protocols:
// classic must be listed (Kafka requires it); consumer enables KIP-848.
func setRebalanceProtocols(c *Config, v string) error {
	classic, consumer := false, false
	for _, p := range splitList(v) {
		switch strings.ToLower(p) {
		case "classic":
			classic = true
		case "consumer":
			consumer = true
		case "share", "streams":
			// Kafka's other protocols; not served here.
		default:
			return fmt.Errorf("unknown group protocol %q (classic, consumer)", p)
		}
	}
	if !classic {
		return fmt.Errorf("must include classic")
	}
	c.Groups.Consumer.Enabled = consumer
	return nil
}

func rebalanceProtocolsValue(c *Config) string {
	if c.Groups.Consumer.Enabled {
		return "classic,consumer"
	}
	return "classic"
}

// consumerAssignorClasses are Kafka's class names of the server-side
// assignors, which group.consumer.assignors takes as their short names.
var consumerAssignorClasses = map[string]string{
	"org.apache.kafka.coordinator.group.assignor.UniformAssignor": group.AssignorUniform,
	"org.apache.kafka.coordinator.group.assignor.RangeAssignor":   group.AssignorRange,
}

// setConsumerAssignors reads group.consumer.assignors: uniform and range
// by name or class name, at least one, none twice.
func setConsumerAssignors(c *Config, v string) error {
	var out []string
	for _, a := range splitList(v) {
		if name, ok := consumerAssignorClasses[a]; ok {
			a = name
		}
		if a != group.AssignorUniform && a != group.AssignorRange {
			return fmt.Errorf("unknown assignor %q (uniform, range)", a)
		}
		if slices.Contains(out, a) {
			return fmt.Errorf("assignor %q listed twice", a)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return fmt.Errorf("must name at least one assignor")
	}
	c.Groups.Consumer.Assignors = out
	return nil
}

// checkAcrossSettings checks the rules that involve more than one
// setting, once all are read.
func checkAcrossSettings(c *Config) *ConfigError {
	if err := checkListeners(c); err != nil {
		return err
	}
	if err := checkShareSettings(c); err != nil {
		return err
	}
	if _, err := resolveTopicConfig(c.TopicDefaults, nil); err != nil {
		k := "log.cleaner.min.compaction.lag.ms"
		return &ConfigError{Key: k, Value: c.Properties[k], Reason: err.Error()}
	}
	if c.FailedAuthenticationDelay >= c.ConnectionsMaxIdle {
		k := "connection.failed.authentication.delay.ms"
		return &ConfigError{Key: k, Value: c.Properties[k], Reason: fmt.Sprintf("must be less than connections.max.idle.ms (%d)", c.ConnectionsMaxIdle.Milliseconds())}
	}
	if q := c.QueuedMaxRequestBytes; q > 0 && q < int64(c.SocketRequestMaxBytes) {
		k := "queued.max.request.bytes"
		return &ConfigError{Key: k, Value: c.Properties[k], Reason: fmt.Sprintf("must be at least socket.request.max.bytes (%d), or -1", c.SocketRequestMaxBytes)}
	}
	for _, need := range []struct {
		name string
		n    int32
	}{{"num.partitions", c.NumPartitions}, {"offsets.topic.num.partitions", int32(c.Groups.NumPartitions)}} {
		if need.n > c.MaxPartitionsPerRequest {
			k := "strata.max.partitions.per.request"
			return &ConfigError{Key: k, Value: c.Properties[k], Reason: fmt.Sprintf("must be at least %s (%d), or no such topic could be created", need.name, need.n)}
		}
	}
	if c.MaxConnectionsPerIP == 0 && len(c.MaxConnectionsPerIPOverrides) == 0 {
		k := "max.connections.per.ip"
		return &ConfigError{Key: k, Value: c.Properties[k], Reason: "can be 0 only if max.connections.per.ip.overrides is set"}
	}
	if err := checkConsumerGroupSettings(c); err != nil {
		return err
	}
	if g := c.Groups; g.MinSessionTimeout > g.MaxSessionTimeout {
		k := "group.min.session.timeout.ms"
		return &ConfigError{Key: k, Value: c.Properties[k], Reason: fmt.Sprintf("must not exceed group.max.session.timeout.ms (%d)", g.MaxSessionTimeout.Milliseconds())}
	}
	return checkGroupProtocols(c)
}

// checkConsumerGroupSettings checks the group.consumer.* bounds as Kafka's
// GroupCoordinatorConfig does: each value within its min and max, the
// heartbeat interval below the session timeout.
func checkConsumerGroupSettings(c *Config) *ConfigError {
	cc := c.Groups.Consumer
	for _, b := range []struct {
		name           string
		v, min, max    time.Duration
		minKey, maxKey string
	}{
		{"group.consumer.session.timeout.ms", cc.SessionTimeout, cc.MinSessionTimeout, cc.MaxSessionTimeout, "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"},
		{"group.consumer.heartbeat.interval.ms", cc.HeartbeatInterval, cc.MinHeartbeatInterval, cc.MaxHeartbeatInterval, "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"},
	} {
		if b.v < b.min || b.v > b.max {
			return &ConfigError{Key: b.name, Value: c.Properties[b.name], Reason: fmt.Sprintf("must be within %s (%d) and %s (%d)", b.minKey, b.min.Milliseconds(), b.maxKey, b.max.Milliseconds())}
		}
	}
	if cc.HeartbeatInterval >= cc.SessionTimeout {
		k := "group.consumer.heartbeat.interval.ms"
		return &ConfigError{Key: k, Value: c.Properties[k], Reason: fmt.Sprintf("must be less than group.consumer.session.timeout.ms (%d)", cc.SessionTimeout.Milliseconds())}
	}
	return nil
}

// setLogDir reads log.dir: one directory.
func setLogDir(c *Config, v string) error {
	if v == "" {
		return fmt.Errorf("must not be empty")
	}
	c.LogDirs = []string{v}
	return nil
}

// setLogDirs reads log.dirs: a comma-separated list of directories,
// none empty, none given twice, none inside another (each holds its own
// partition directories and lock).
func setLogDirs(c *Config, v string) error {
	var dirs []string
	for _, d := range strings.Split(v, ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			return fmt.Errorf("an empty directory in the list")
		}
		dirs = append(dirs, d)
	}
	for i, a := range dirs {
		for _, b := range dirs[:i] {
			ca, cb := filepath.Clean(a), filepath.Clean(b)
			if ca == cb {
				return fmt.Errorf("directory %s given twice", a)
			}
			if strings.HasPrefix(ca, cb+string(filepath.Separator)) || strings.HasPrefix(cb, ca+string(filepath.Separator)) {
				return fmt.Errorf("directories %s and %s are nested", b, a)
			}
		}
	}
	c.LogDirs = dirs
	return nil
}

func logDirsValue(c *Config) string { return strings.Join(c.LogDirs, ",") }

func checkZooKeeperConnect(v string) error {
	if v == "" {
		return nil
	}
	if _, _, err := coord.ParseConnect(v); err != nil {
		return fmt.Errorf("want host:port[,host:port...][/chroot]: %v", err)
	}
	return nil
}

// setPerIPOverrides reads max.connections.per.ip.overrides as Kafka does:
// comma-separated host:count pairs, split at the last colon (so that an
// IPv6 address may be given bare or in brackets). A host is an IP address
// or a hostname; the count is at least 0.
func setPerIPOverrides(c *Config, v string) error {
	out := map[string]int{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndexByte(item, ':')
		if i < 0 {
			return fmt.Errorf("%q: want host:count", item)
		}
		host := strings.TrimSpace(item[:i])
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		n, err := strconv.ParseInt(strings.TrimSpace(item[i+1:]), 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("%q: the count must be an int of at least 0", item)
		}
		if !validOverrideHost(host) {
			return fmt.Errorf("%q: %q is neither an IP address nor a hostname", item, host)
		}
		if _, dup := out[host]; dup {
			return fmt.Errorf("host %q is given twice", host)
		}
		out[host] = int(n)
	}
	c.MaxConnectionsPerIPOverrides = out
	return nil
}

// validOverrideHost accepts an IP address or a hostname (letters,
// digits, '-', '.', '_').
func validOverrideHost(h string) bool {
	if h == "" {
		return false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// perIPOverridesValue renders max.connections.per.ip.overrides back,
// sorted by host.
func perIPOverridesValue(c *Config) string {
	hosts := slices.Sorted(maps.Keys(c.MaxConnectionsPerIPOverrides))
	parts := make([]string, len(hosts))
	for i, h := range hosts {
		parts[i] = h + ":" + strconv.Itoa(c.MaxConnectionsPerIPOverrides[h])
	}
	return strings.Join(parts, ",")
}
