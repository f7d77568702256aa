package broker

// WriteShareGroupState: v0-1
//
// Behavior:
// * A share coordinator RPC (KIP-932, Kafka 4.2), sent by brokers: each
//   share partition is answered by this broker's share coordinator
//   (share_coordinator.go, package sharestate) when it leads the share
//   partition's partition of __share_group_state, else NOT_COORDINATOR
//   (COORDINATOR_LOAD_IN_PROGRESS while it loads). The write is appended
//   to __share_group_state (acks=all) before the answer;
//   FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH for older epochs,
//   UNKNOWN_TOPIC_OR_PARTITION for a topic partition the broker does not
//   know.
// * Authorization (with an authorizer, as Kafka): CLUSTER_ACTION on the
//   cluster, else every share partition is CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// * v0: flexible versions
// * v1: DeliveryCompleteCount (KIP-1226)

func init() { register(85, 0, 1, handleShareState) }
