package broker

import (
	"errors"
	"fmt"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce: v3-9
//
// Behavior:
// * Each partition must carry exactly one record batch of magic 2 (Kafka's
//   rule for v3+), else INVALID_RECORD. The batch is validated before
//   anything is written: CRC-32C, lengths and a known codec
//   (CORRUPT_MESSAGE); base offset 0, records == last offset delta + 1 and
//   no control batch from a client (INVALID_RECORD); zstd before v7
//   (UNSUPPORTED_COMPRESSION_TYPE); size against the topic's
//   max.message.bytes (MESSAGE_TOO_LARGE). Records inside a batch are
//   not decompressed: the CRC covers them and they are stored as sent.
// * The batch gets its offsets from the log end and the partition's leader
//   epoch; with message.timestamp.type=LogAppendTime its timestamps become
//   broker time (and the CRC is recomputed).
// * Only the partition's leader appends: a partition another broker leads
//   (or none does) is NOT_LEADER_OR_FOLLOWER, so the client refreshes its
//   metadata and goes to the leader. The leadership and leader epoch are
//   the coordinator's, as this broker last learned them.
// * acks must be 0, 1 or -1 (INVALID_REQUIRED_ACKS). Data replication is
//   not there yet: the only replica that holds a batch is the leader, so
//   acks=1 and acks=-1 both answer after the local append (which fsyncs
//   first when flush.messages is reached); acks=-1 with
//   min.insync.replicas above 1 is NOT_ENOUGH_REPLICAS.
// * acks=0 gets no response; if any partition failed, the connection is
//   closed instead, which is how Kafka tells such a producer.
// * Unknown topics are created when auto.create.topics.enable is on (an
//   illegal name is then INVALID_TOPIC_EXCEPTION), else
//   UNKNOWN_TOPIC_OR_PARTITION; an unknown partition of a known topic is
//   UNKNOWN_TOPIC_OR_PARTITION.
// * Idempotent batches (producer id >= 0) are checked against the
//   partition's producer state (package producer): a duplicate of one of
//   the producer's last five batches is answered with its original offsets
//   and not appended again; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER,
//   an old epoch INVALID_PRODUCER_EPOCH. Transactional batches are refused
//   with INVALID_TXN_STATE: transactions are not supported.
// * __consumer_offsets is written only by the group coordinator: a produce
//   to it is INVALID_TOPIC_EXCEPTION, as Kafka answers clients other than
//   its own admin tools.
// * TimeoutMillis is ignored: there are no followers to wait for yet.
//
// Version notes:
// * v5: LogStartOffset in the response
// * v7: zstd allowed
// * v8: ErrorMessage and ErrorRecords in the response
// * v9: flexible versions

func init() { register(0, 3, 9, handleProduce) }

func handleProduce(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	failed := false
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		var ts *topicState
		var topicErr error
		switch {
		case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
			topicErr = newKafkaError(kerr.InvalidRequiredAcks, "acks must be 0, 1 or -1, got %d", req.Acks)
		case isInternalTopic(rt.Topic):
			topicErr = newKafkaError(kerr.InvalidTopicException, "cannot append to internal topic %s", rt.Topic)
		default:
			if ts = s.topic(rt.Topic); ts == nil {
				ts, topicErr = s.autoCreateTopic(rt.Topic)
			}
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			sp.LogStartOffset = -1
			var err error
			if topicErr != nil {
				err = topicErr
			} else {
				err = s.producePartition(ts, req, rp.Partition, rp.Records, &sp)
			}
			if err != nil {
				failed = true
				code, msg := errorCode(err)
				sp.ErrorCode = code
				if req.Version >= 8 && msg != "" {
					sp.ErrorMessage = &msg
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		return reply{none: true, closeConn: failed}, nil
	}
	return reply{msg: resp}, nil
}

// producePartition validates and appends one partition's records and
// fills the response's offsets.
func (s *Server) producePartition(ts *topicState, req *kmsg.ProduceRequest, index int32, records []byte, sp *kmsg.ProduceResponseTopicPartition) error {
	p, lead, err := s.leaderPartition(ts, ts.name, index)
	if err != nil {
		return err
	}
	if err := validateProduceBatch(req.Version, records, ts.cfg.maxMessageBytes); err != nil {
		return err
	}
	if req.Acks == -1 && ts.cfg.minInsyncReps > 1 {
		return newKafkaError(kerr.NotEnoughReplicas, "in-sync replicas 1 is below min.insync.replicas %d", ts.cfg.minInsyncReps)
	}
	opts := segment.AppendOptions{LeaderEpoch: lead.epoch}
	if ts.cfg.logAppendTime {
		opts.LogAppendTime = s.nowFn().UnixMilli()
	}
	res, err := p.appendProduced(records, opts)
	if err != nil {
		if code := producer.ErrorCode(err); code != kerr.UnknownServerError.Code {
			return newKafkaError(kerr.ErrorForCode(code).(*kerr.Error), "%v", err)
		}
		return appendError(err)
	}
	s.stats.produceBatches.Add(1)
	s.stats.produceBytes.Add(int64(len(records)))
	s.metrics.topic(ts.name).in.Add(float64(len(records)))
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = res.LogAppendTime
	sp.LogStartOffset = res.LogStartOffset
	return nil
}

// validateProduceBatch applies Kafka's produce-time rules to one
// partition's records; see the Behavior list above.
func validateProduceBatch(version int16, records []byte, maxMessageBytes int32) error {
	if len(records) == 0 {
		return newKafkaError(kerr.InvalidRecord, "produce requests with version %d must have at least one record batch per partition", version)
	}
	h, err := segment.ParseHeader(records)
	switch {
	case errors.Is(err, segment.ErrBadMagic):
		return newKafkaError(kerr.InvalidRecord, "produce requests with version %d are only allowed to contain record batches with magic version 2", version)
	case err != nil:
		return newKafkaError(kerr.CorruptMessage, "%v", err)
	}
	if int64(h.Size()) < int64(len(records)) {
		return newKafkaError(kerr.InvalidRecord, "produce requests with version %d are only allowed to contain exactly one record batch per partition", version)
	}
	if int64(h.Size()) > int64(maxMessageBytes) {
		return newKafkaError(kerr.MessageTooLarge, "record batch of %d bytes is larger than max.message.bytes %d", h.Size(), maxMessageBytes)
	}
	if _, err := segment.ValidateProduced(records); err != nil {
		if errors.Is(err, segment.ErrCountMismatch) {
			return newKafkaError(kerr.InvalidRecord, "%v", err)
		}
		return newKafkaError(kerr.CorruptMessage, "%v", err)
	}
	if h.Compression() == segment.CodecZstd && version < 7 {
		return newKafkaError(kerr.UnsupportedCompressionType, "produce requests with version %d are not allowed to use zstd compression", version)
	}
	if h.BaseOffset != 0 {
		return newKafkaError(kerr.InvalidRecord, "the base offset of the record batch should be 0, but it is %d", h.BaseOffset)
	}
	if h.Control() {
		return newKafkaError(kerr.InvalidRecord, "clients may not produce control batches")
	}
	if h.Transactional() {
		return newKafkaError(kerr.InvalidTxnState, "transactional batch from producer id %d, but transactions are not supported yet", h.ProducerID)
	}
	return nil
}

// appendError maps a Log.Append failure to a Kafka error.
func appendError(err error) error {
	switch {
	case segment.IsCorrupt(err):
		return newKafkaError(kerr.CorruptMessage, "%v", err)
	case errors.Is(err, segment.ErrClosed):
		return newKafkaError(kerr.NotLeaderForPartition, "partition is closing (topic deleted or broker shutting down)")
	default:
		return newKafkaError(kerr.KafkaStorageError, "%v", fmt.Errorf("append: %w", err))
	}
}
