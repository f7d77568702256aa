package group

// API is one Kafka API the Coordinator serves, with the request versions
// it serves it at (inclusive).
type API struct {
	Key      int16
	Name     string
	Min, Max int16
}

// APIs lists the APIs the Coordinator serves and their versions; the
// server advertises exactly these in ApiVersions and routes them here.
// FindCoordinator stays with the server (it needs PartitionFor and the
// leader of that partition of __consumer_offsets).
func APIs() []API {
	return []API{
		{Key: 8, Name: "OffsetCommit", Min: 0, Max: 9},
		{Key: 9, Name: "OffsetFetch", Min: 0, Max: 9},
		{Key: 11, Name: "JoinGroup", Min: 0, Max: 9},
		{Key: 12, Name: "Heartbeat", Min: 0, Max: 4},
		{Key: 13, Name: "LeaveGroup", Min: 0, Max: 5},
		{Key: 14, Name: "SyncGroup", Min: 0, Max: 5},
		{Key: 15, Name: "DescribeGroups", Min: 0, Max: 5},
		{Key: 16, Name: "ListGroups", Min: 0, Max: 5},
		{Key: 28, Name: "TxnOffsetCommit", Min: 0, Max: 5},
		{Key: 42, Name: "DeleteGroups", Min: 0, Max: 2},
		{Key: 47, Name: "OffsetDelete", Min: 0, Max: 0},
		{Key: 68, Name: "ConsumerGroupHeartbeat", Min: 0, Max: 1},
		{Key: 69, Name: "ConsumerGroupDescribe", Min: 0, Max: 1},
	}
}
