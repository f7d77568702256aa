package broker

// DeleteShareGroupState: v0
//
// Behavior:
// * A share coordinator RPC (KIP-932, Kafka 4.2), sent by brokers: each
//   share partition is answered by this broker's share coordinator
//   (share_coordinator.go, package sharestate) when it leads the share
//   partition's partition of __share_group_state, else NOT_COORDINATOR
//   (COORDINATOR_LOAD_IN_PROGRESS while it loads). Tombstones remove the
//   share partition's state.
// * Authorization (with an authorizer, as Kafka): CLUSTER_ACTION on the
//   cluster, else every share partition is CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// * v0: flexible versions

func init() { register(86, 0, 0, handleShareState) }
