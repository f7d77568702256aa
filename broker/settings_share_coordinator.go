package broker

import "math"

// ShareCoordinatorConfig holds the share coordinator's settings
// (share_coordinator.go), by Kafka's names.
type ShareCoordinatorConfig struct {
	// StateTopicNumPartitions is
	// share.coordinator.state.topic.num.partitions.
	StateTopicNumPartitions int
	// StateTopicReplicationFactor is
	// share.coordinator.state.topic.replication.factor.
	StateTopicReplicationFactor int16
	// StateTopicMinISR is share.coordinator.state.topic.min.isr.
	StateTopicMinISR int
	// StateTopicSegmentBytes is share.coordinator.state.topic.segment.bytes.
	StateTopicSegmentBytes int32
	// UpdatesPerSnapshot is
	// share.coordinator.snapshot.update.records.per.snapshot.
	UpdatesPerSnapshot int
}

// shareCoordinatorSettings are ShareCoordinatorConfig's settings, with
// Kafka 4.2's defaults and ranges.
var shareCoordinatorSettings = []setting{
	{name: "share.coordinator.state.topic.num.partitions", typ: typeInt, def: "50", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.ShareCoordinator.StateTopicNumPartitions },
		doc:   "Partitions of __share_group_state (the share groups' state, KIP-932) when it is created; an existing topic keeps its count."},
	{name: "share.coordinator.state.topic.replication.factor", typ: typeShort, def: "3", valid: between(1, math.MaxInt16),
		field: func(c *Config) any { return &c.ShareCoordinator.StateTopicReplicationFactor },
		doc:   "Replicas of __share_group_state when it is created, capped at the live brokers."},
	{name: "share.coordinator.state.topic.min.isr", typ: typeInt, def: "2", valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.ShareCoordinator.StateTopicMinISR },
		doc:   "min.insync.replicas of __share_group_state when it is created, capped at its replicas; a share coordinator write needs that many in-sync replicas."},
	{name: "share.coordinator.state.topic.segment.bytes", typ: typeInt, def: "104857600", valid: between(14, math.MaxInt32),
		field: func(c *Config) any { return &c.ShareCoordinator.StateTopicSegmentBytes },
		doc:   "segment.bytes of __share_group_state when it is created."},
	{name: "share.coordinator.snapshot.update.records.per.snapshot", typ: typeInt, def: "500", valid: between(0, 500),
		field: func(c *Config) any { return &c.ShareCoordinator.UpdatesPerSnapshot },
		doc:   "Update records of a share partition's state after which its next write is a full snapshot (0: every write is)."},
}
