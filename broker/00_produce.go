package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce: v0-12 (v0-v2: produce_legacy.go)
//
// Behavior:
// * Each partition must carry exactly one record batch of magic 2 (Kafka's
//   rule for v3+), else INVALID_RECORD. The batch is validated before
//   anything is written: CRC-32C, lengths and a known codec
//   (CORRUPT_MESSAGE); base offset 0, records == last offset delta + 1 and
//   no control batch from a client (INVALID_RECORD); zstd before v7
//   (UNSUPPORTED_COMPRESSION_TYPE); size against the topic's
//   max.message.bytes (MESSAGE_TOO_LARGE). Records inside a batch are
//   not decompressed: the CRC covers them and they are stored as sent,
//   unless the topic's compression.type names another codec than the
//   batch's: then the batch is recompressed with it ("uncompressed":
//   decompressed; at compression.gzip|lz4|zstd.level) before the append,
//   as Kafka's LogValidator
//   (validateMessagesAndAssignOffsetsCompressed): records, offset deltas,
//   timestamps, producer id, epoch and base sequence, transactional flag
//   kept; codec bits, length and CRC new. A batch whose records
//   decompress past 128 MiB is CORRUPT_MESSAGE; one that outgrows
//   max.message.bytes once recompressed MESSAGE_TOO_LARGE.
// * The batch gets its offsets from the log end and the partition's leader
//   epoch; with message.timestamp.type=LogAppendTime its timestamps become
//   broker time (and the CRC is recomputed).
// * Only the partition's leader appends: a partition another broker leads
//   (or none does) is NOT_LEADER_OR_FOLLOWER, so the client refreshes its
//   metadata and goes to the leader. The leadership and leader epoch are
//   the coordinator's, as this broker last learned them. From v10
//   (KIP-951) the answer names the current leader, its epoch and its
//   address, so the client moves without a metadata refresh
//   (produce_leader_discovery.go).
// * acks must be 0, 1 or -1 (INVALID_REQUIRED_ACKS). acks=1 answers after
//   the leader's append (which fsyncs first when flush.messages is
//   reached). acks=-1 refuses the batch before appending when the ISR is
//   smaller than min.insync.replicas (NOT_ENOUGH_REPLICAS); after the
//   append it waits (parked on the partition's replication state, no
//   polling) until the high watermark passes the batch: then it answers
//   success, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell below
//   min.insync.replicas meanwhile. All partitions of a request wait
//   together, up to TimeoutMillis: then REQUEST_TIMED_OUT
//   (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is too small). A
//   leadership change while waiting is NOT_LEADER_OR_FOLLOWER.
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
//   an old epoch INVALID_PRODUCER_EPOCH.
// * Transactional batches (KIP-98) are appended like idempotent ones and
//   open the producer's transaction in the partition; the last stable
//   offset stays at its first offset until the coordinator's marker
//   (WriteTxnMarkers) ends it. A non-transactional batch from a producer
//   whose transaction is open is INVALID_TXN_STATE. When the request has a
//   transactional id, the producer's first transactional batch in the
//   partition is verified with its transaction coordinator first (KIP-890
//   part 1): not part of the transaction is INVALID_TXN_STATE, an old
//   epoch INVALID_PRODUCER_EPOCH or PRODUCER_FENCED (v11+: a partition
//   not in the transaction is TRANSACTION_ABORTABLE, KIP-890, so the
//   client aborts instead of failing fatally), the coordinator
//   unavailable (or a marker arriving meanwhile) NOT_ENOUGH_REPLICAS,
//   which clients retry. Under transaction version 2 (v12) the
//   partition is added instead; a batch of an epoch that a version 2
//   EndTxn has bumped is INVALID_PRODUCER_EPOCH. Without a transactional id there is no
//   verification (Kafka refuses such a request with
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED; no client sends one).
// * A topic whose cleanup.policy holds compact refuses a batch with a
//   record without a key (the records are decompressed to check):
//   INVALID_RECORD, "Compacted topic cannot accept message without key
//   in topic partition <topic>-<n>." (Kafka's LogValidator), with the
//   record's index in ErrorRecords (v8+). The other partitions of the
//   request are not affected.
// * __consumer_offsets is written only by the group coordinator: a produce
//   to it is INVALID_TOPIC_EXCEPTION, as Kafka answers clients other than
//   its own admin tools.
// * Authorization (with an authorizer): a transactional id needs WRITE on
//   it, else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
//   each topic needs WRITE, else its partitions are
//   TOPIC_AUTHORIZATION_FAILED (checked before the topic's existence, so
//   a denied client learns nothing about it). Auto-creation also needs
//   CREATE on the cluster or the topic, else UNKNOWN_TOPIC_OR_PARTITION.
//
// Version notes:
// * v0-v2: message sets of magic 0 and 1, converted (produce_legacy.go)
// * v1: ThrottleMillis
// * v2: LogAppendTime in the response
// * v3: TransactionID; record batches v2 only
// * v5: LogStartOffset in the response
// * v7: zstd allowed
// * v8: ErrorMessage and ErrorRecords in the response
// * v9: flexible versions
// * v10: CurrentLeader and NodeEndpoints on NOT_LEADER_OR_FOLLOWER
//   (KIP-951, produce_leader_discovery.go)
// * v11: TRANSACTION_ABORTABLE (KIP-890) where v0-10 get INVALID_TXN_STATE
// * v12: transaction version 2 (KIP-890 part 2): while transaction.version
//   2 is finalized, the producer's first transactional batch in a
//   partition adds the partition to its transaction (the coordinator's
//   AddPartitionsToTxn v5 path, whatever
//   transaction.partition.verification.enable says) instead of being
//   verified; its errors are the verification's. Otherwise as v11.

func init() {
	register(0, 0, 12, handleProduce)
	// The records are appended (a copy into the page cache) or copied
	// by a conversion before handleProduce returns; nothing keeps them.
	reuseFrames(0)
}

// hasTransactionalBatch reports whether the first batch of any partition's
// records is transactional, the batch Kafka looks at
// (RequestUtils.hasTransactionalRecords). Message sets of magic 0 and 1
// cannot be.
func hasTransactionalBatch(req *kmsg.ProduceRequest) bool {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if h, err := segment.ParseHeader(rp.Records); err == nil && h.Transactional() {
				return true
			}
		}
	}
	return false
}

// produceTxnAbortableVersion is the first Produce version that may be
// answered TRANSACTION_ABORTABLE (KIP-890).
const produceTxnAbortableVersion = 11

// produceTxnV2Version is the first Produce version of transaction
// version 2 (KIP-890 part 2): with transaction.version 2 finalized, a
// producer's first transactional batch in a partition adds the partition
// to its transaction.
const produceTxnV2Version = 12

func handleProduce(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	failed := false
	var waits []produceWait
	var txnErr error
	switch {
	case req.TransactionID != nil && !s.authorize(r, acl.OpWrite, acl.TransactionalID(*req.TransactionID)):
		txnErr = newKafkaError(kerr.TransactionalIDAuthorizationFailed, "not authorized to write transactional id %q", *req.TransactionID)
	case req.TransactionID == nil && hasTransactionalBatch(req):
		// As Kafka (KafkaApis.handleProduceRequest): transactional
		// records need the transactional id they are authorized by.
		txnErr = newKafkaError(kerr.TransactionalIDAuthorizationFailed, "transactional record batches need the request's transactional id")
	}
	mayWrite := s.topicAuthorizer(r, acl.OpWrite)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		var ts *topicState
		var topicErr error
		switch {
		case txnErr != nil:
			topicErr = txnErr
		case !mayWrite(rt.Topic):
			topicErr = newKafkaError(kerr.TopicAuthorizationFailed, "not authorized to write to topic %q", rt.Topic)
		case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
			topicErr = newKafkaError(kerr.InvalidRequiredAcks, "acks must be 0, 1 or -1, got %d", req.Acks)
		case isInternalTopic(rt.Topic):
			topicErr = newKafkaError(kerr.InvalidTopicException, "cannot append to internal topic %s", rt.Topic)
		default:
			if ts = s.topic(rt.Topic); ts == nil {
				if s.mayCreateTopic(r, rt.Topic) {
					ts, topicErr = s.autoCreateTopic(rt.Topic)
				} else {
					topicErr = newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist (and creating it needs CREATE on the cluster or the topic)", rt.Topic)
				}
			}
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			sp.LogStartOffset = -1
			var err error
			var w *produceWait
			if topicErr != nil {
				err = topicErr
			} else {
				w, err = s.producePartition(groupCtx(r), ts, req, rp.Partition, rp.Records, &sp)
			}
			if err != nil {
				failed = true
				setProduceError(req.Version, &sp, err)
			}
			if w != nil {
				w.topic, w.part = len(resp.Topics), len(st.Partitions)
				waits = append(waits, *w)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	// Kafka's produce quota counts the request's bytes, the request
	// quota its handling (the wait for replication is not work).
	thr, thrType := s.produceThrottle(r)
	if len(waits) > 0 {
		deadline := s.nowFn().Add(time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond)
		for _, w := range waits {
			if err := s.awaitHighWatermark(groupCtx(r), w.p, w.epoch, w.target, w.minISR, deadline); err != nil {
				sp := &resp.Topics[w.topic].Partitions[w.part]
				setProduceError(req.Version, sp, err)
			}
		}
	}
	if req.Acks == 0 {
		return reply{none: true, closeConn: failed, throttleMs: thr, throttleType: thrType}, nil
	}
	addProduceLeaders(s.coord.Snapshot, r.listenerName(), resp)
	resp.ThrottleMillis = thr
	return reply{msg: resp, throttleMs: thr, throttleType: thrType}, nil
}

// produceWait is an acks=all partition waiting for its high watermark.
type produceWait struct {
	p           *partition
	epoch       int32
	target      int64
	minISR      int
	topic, part int // indexes in the response
}

// setProduceError puts err's code (and message, v8+) in sp, keeping no
// offsets.
func setProduceError(version int16, sp *kmsg.ProduceResponseTopicPartition, err error) {
	code, msg := errorCode(err)
	sp.ErrorCode = code
	sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
	if version >= 8 && msg != "" {
		sp.ErrorMessage = &msg
	}
}

// producePartition validates and appends one partition's records and
// fills the response's offsets. For acks=-1 it returns what to wait for.
func (s *Server) producePartition(ctx context.Context, ts *topicState, req *kmsg.ProduceRequest, index int32, records []byte, sp *kmsg.ProduceResponseTopicPartition) (*produceWait, error) {
	p, lead, err := s.leaderPartition(ts, ts.name, index)
	if err != nil {
		return nil, err
	}
	if req.Version < 3 { // message sets of magic 0 and 1: produce_legacy.go
		if records, err = s.convertLegacyProduce(records, ts.cfg); err != nil {
			return nil, err
		}
	}
	if err := validateProduceBatch(req.Version, records, ts.cfg.maxMessageBytes); err != nil {
		return nil, err
	}
	if ts.cfg.compact {
		if err := checkRecordKeys(records, ts.name, index, sp); err != nil {
			return nil, err
		}
	}
	if records, err = recompressProduced(records, ts.cfg); err != nil {
		return nil, err
	}
	minISR := int(ts.cfg.minInsyncReps)
	if req.Acks == -1 {
		if n := p.repl.ISRSize(); n < minISR {
			return nil, newKafkaError(kerr.NotEnoughReplicas, "in-sync replicas %d are below min.insync.replicas %d", n, minISR)
		}
	}
	opts := segment.AppendOptions{LeaderEpoch: lead.epoch}
	if ts.cfg.logAppendTime {
		opts.LogAppendTime = s.nowFn().UnixMilli()
	}
	// A producer's first transactional batch in the partition is
	// verified with its transaction coordinator (KIP-890), outside the
	// append lock.
	h, err := segment.ParseHeader(records)
	if err != nil {
		return nil, newKafkaError(kerr.CorruptMessage, "%v", err)
	}
	chk := txnCheck{abortable: req.Version >= produceTxnAbortableVersion, add: req.Version >= produceTxnV2Version && s.transactionsV2()}
	markers, verified, err := s.verifyFirstTxnBatch(ctx, chk, p, req.TransactionID, h)
	if err != nil {
		return nil, err
	}
	res, err := p.appendProduced(records, opts, verified, markers)
	if err != nil {
		if code := producer.ErrorCode(err); code != kerr.UnknownServerError.Code {
			return nil, newKafkaError(kerr.ErrorForCode(code).(*kerr.Error), "%v", err)
		}
		return nil, appendError(err)
	}
	p.repl.AdvanceHighWatermark()
	s.stats.produceBatches.Add(1)
	s.stats.produceBytes.Add(int64(len(records)))
	s.metrics.topic(ts.name).in.Add(float64(len(records)))
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = res.LogAppendTime
	sp.LogStartOffset = res.LogStartOffset
	if req.Acks != -1 {
		return nil, nil
	}
	return &produceWait{p: p, epoch: lead.epoch, target: res.LastOffset + 1, minISR: minISR}, nil
}

// recompressProduced applies the topic's compression.type to a validated
// batch: one in another codec is recompressed (bounded by
// DefaultMaxDecompressed, else CORRUPT_MESSAGE) and held against
// max.message.bytes again, as Kafka re-checks a batch whose size changed
// in LogValidator.
func recompressProduced(records []byte, cfg topicConfig) ([]byte, error) {
	if !cfg.recompress {
		return records, nil
	}
	if h, err := segment.ParseHeader(records); err == nil && h.Compression() == cfg.codec {
		return records, nil // already in the topic's codec
	}
	out, err := segment.Recompress(records, cfg.codec, cfg.levels, segment.DefaultMaxDecompressed)
	if err != nil {
		return nil, newKafkaError(kerr.CorruptMessage, "%v", err)
	}
	if int64(len(out)) > int64(cfg.maxMessageBytes) {
		return nil, newKafkaError(kerr.MessageTooLarge, "record batch of %d bytes once recompressed with %s is larger than max.message.bytes %d", len(out), cfg.codec, cfg.maxMessageBytes)
	}
	return out, nil
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
	return nil
}

// checkRecordKeys refuses a batch for a compacted topic that holds a
// record without a key, as Kafka's LogValidator.validateKey: the
// partition fails with INVALID_RECORD, naming the record (v8+
// ErrorRecords).
func checkRecordKeys(records []byte, topic string, index int32, sp *kmsg.ProduceResponseTopicPartition) error {
	it, err := segment.NewRecordIter(records, segment.DefaultMaxDecompressed)
	if err != nil {
		return newKafkaError(kerr.CorruptMessage, "%v", err)
	}
	for i := int32(0); ; i++ {
		rec, ok, err := it.Next()
		if err != nil {
			return newKafkaError(kerr.CorruptMessage, "%v", err)
		}
		if !ok {
			return nil
		}
		if rec.Key == nil {
			msg := fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d.", topic, index)
			re := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			re.RelativeOffset, re.ErrorMessage = i, &msg
			sp.ErrorRecords = append(sp.ErrorRecords, re)
			return newKafkaError(kerr.InvalidRecord, "%s", msg)
		}
	}
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
