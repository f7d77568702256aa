// Package sharestate is Strata's share coordinator (KIP-932): it keeps the
// state of every share partition (which records of a share group's
// partition are acknowledged, archived or still to deliver) durable in the
// internal topic __share_group_state, and answers the share coordinator
// RPCs (InitializeShareGroupState, ReadShareGroupState,
// WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary).
//
// Share groups reach it through the Persister interface, which the broker
// implements by routing each request to the coordinator of its partitions.
package sharestate
