package broker

import (
	"context"
	"errors"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/producer"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// WriteTxnMarkers: v0-2
//
// Behavior:
// * Sent by transaction coordinators (Kafka serves it on the client
//   listener too): for each marker, a COMMIT or ABORT control batch with
//   the producer's id and epoch and the coordinator epoch is appended to
//   each named partition that this broker leads, with the partition's
//   leader epoch, and the answer waits (acks=all) until the high
//   watermark passes it, up to 30 s (Kafka's request.timeout.ms): then
//   REQUEST_TIMED_OUT.
// * Per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
//   KAFKA_STORAGE_ERROR (offline replica or a failed append);
//   INVALID_PRODUCER_EPOCH when the marker's producer epoch is below the
//   producer's in the partition; TRANSACTION_COORDINATOR_FENCED when its
//   coordinator epoch is below that of the producer's last marker there;
//   NOT_ENOUGH_REPLICAS when the ISR is below min.insync.replicas before
//   the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND after it.
// * A marker of transaction version 2 (v2 TransactionVersion 2) carries
//   the epoch its EndTxn bumped, above the epoch of the transaction's
//   records: one whose epoch is not above that of a transaction open in
//   the partition is INVALID_PRODUCER_EPOCH (it is stale and would end
//   the producer's next transaction), as Kafka 4.x checks it.
// * A marker ends the producer's transaction in the partition: the last
//   stable offset moves past it once it is replicated, and an ABORT
//   records the transaction in the aborted-transaction index (.txnindex)
//   that read_committed fetches return. On a partition of
//   __consumer_offsets, the group coordinator is told once the marker is
//   replicated, so the transaction's offsets become visible (commit) or
//   are dropped (abort).
// * Authorization (with an authorizer): CLUSTER_ACTION on the cluster,
//   else every partition is CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// * v1: flexible versions
// * v2: TransactionVersion per marker (KIP-890 part 2)

func init() { register(27, 0, writeTxnMarkersV2Version, handleWriteTxnMarkers) }

// txnMarkerTimeout bounds the wait for a marker's replication (Kafka
// uses request.timeout.ms, 30 s by default).
const txnMarkerTimeout = 30 * time.Second

func handleWriteTxnMarkers(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.WriteTxnMarkersRequest)
	if !s.authorize(r, acl.OpClusterAction, acl.Cluster) {
		resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return reply{msg: resp}, nil
	}
	return reply{msg: s.writeTxnMarkers(groupCtx(r), req)}, nil
}

// writeTxnMarkers appends the request's markers to the partitions this
// broker leads and waits for their replication (see the Behavior list
// above); the transaction coordinator calls it directly for its local
// partitions. The response has one entry per marker and partition, in
// the request's order.
func (s *Server) writeTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	type wait struct {
		p           *partition
		epoch       int32
		target      int64
		minISR      int
		internal    bool
		pid         int64
		commit      bool
		marker, top int
	}
	var waits []wait
	now := s.nowFn().UnixMilli()
	for mi, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			ts := s.topic(t.Topic)
			for _, index := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = index
				p, _, err := s.leaderPartition(ts, t.Topic, index)
				minISR := 0
				if err == nil {
					minISR = int(ts.cfg.minInsyncReps)
					if n := p.repl.ISRSize(); n < minISR {
						err = newKafkaError(kerr.NotEnoughReplicas, "in-sync replicas %d are below min.insync.replicas %d", n, minISR)
					}
				}
				if err == nil {
					res, epoch, aerr := p.appendMarker(s.cfg.BrokerID, txnMarker{pid: m.ProducerID, epoch: m.ProducerEpoch, commit: m.Committed,
						coordinatorEpoch: m.CoordinatorEpoch, version: m.TransactionVersion}, now)
					if err = aerr; err != nil {
						if errors.Is(err, errTxnIndex) {
							s.storageFailure(p, err)
							err = newKafkaError(kerr.KafkaStorageError, "%v", err)
						}
						err = markerAppendError(err)
					} else {
						p.repl.AdvanceHighWatermark()
						waits = append(waits, wait{p: p, epoch: epoch, target: res.LastOffset + 1, minISR: minISR,
							internal: isInternalTopic(t.Topic), pid: m.ProducerID, commit: m.Committed, marker: mi, top: len(rm.Topics)})
					}
				}
				if err != nil {
					rp.ErrorCode, _ = errorCode(err)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	deadline := s.nowFn().Add(txnMarkerTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for _, w := range waits {
		if err := s.awaitHighWatermark(ctx, w.p, w.epoch, w.target, w.minISR, deadline); err != nil {
			*partitionSlot(resp, w.marker, w.top, w.p.index), _ = errorCode(err)
			continue
		}
		if w.internal {
			s.groupTxnMarker(w.p.index, w.pid, w.commit)
		}
	}
	return resp
}

// partitionSlot is the error code of a partition in a marker's topic of
// the response.
func partitionSlot(resp *kmsg.WriteTxnMarkersResponse, marker, top int, index int32) *int16 {
	parts := resp.Markers[marker].Topics[top].Partitions
	for i := range parts {
		if parts[i].Partition == index {
			return &parts[i].ErrorCode
		}
	}
	var none int16
	return &none
}

// markerAppendError maps appendMarker's failures: the producer state's
// Kafka errors as they are, the log's through appendError.
func markerAppendError(err error) error {
	var ke *kafkaError
	if errors.As(err, &ke) {
		return err
	}
	if code := producer.ErrorCode(err); code != kerr.UnknownServerError.Code {
		return newKafkaError(kerr.ErrorForCode(code).(*kerr.Error), "%v", err)
	}
	return appendError(err)
}
