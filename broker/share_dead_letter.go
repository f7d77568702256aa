package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stratastream/strata/broker/share"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/proto/replpb"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// This file writes share groups' dead-letter copies (KIP-1191): when a
// record of a share partition is rejected or reaches the delivery limit
// and its group names a topic in errors.deadletterqueue.topic.name, the
// share-partition leader (this broker) writes a record to that topic:
// the dead-letter headers below, and with
// errors.deadletterqueue.copy.record.enable the original's key, value
// and headers, read from the log as ShareFetch reads it (shareRead,
// remote tier included). The copy goes to partition (source partition
// mod the topic's partition count), as Kafka's, with acks=all, as an
// idempotent producer of this broker's, through the produce path a
// client's batch takes (producePartition): here when this broker leads
// that partition, else on its leader over the ProduceDeadLetter call of
// the Transactions gRPC service. The share manager archives the record
// only after the write was acknowledged (share/dead_letter.go).
//
// A topic that does not exist is created, with the broker's defaults,
// only under errors.deadletterqueue.auto.create.topics.enable and when
// its name starts with errors.deadletterqueue.topic.name.prefix (Kafka's
// rules); otherwise, as for a topic that refuses the copy for good
// (MESSAGE_TOO_LARGE, authorization, ...), the record is archived
// without a copy, logged and counted as failed
// (strata_share_dead_letter_failed_records_total). Retriable errors are
// tried again with the same batch (so the idempotent producer drops a
// duplicate), and after that call gives up, later with a new producer id.

// The headers of a dead-letter record, Kafka's (ShareGroupDLQRecordHelper).
// Values are UTF-8 text: the source topic's name, its partition and offset
// and the delivery count in decimal, the group id, and why. Never change
// them.
const (
	dlqHeaderTopic         = "__dlq.errors.topic"
	dlqHeaderPartition     = "__dlq.errors.partition"
	dlqHeaderOffset        = "__dlq.errors.offset"
	dlqHeaderGroup         = "__dlq.errors.group"
	dlqHeaderDeliveryCount = "__dlq.errors.delivery.count"
	dlqHeaderMessage       = "__dlq.errors.message"
)

// The __dlq.errors.message values, Kafka's.
const (
	dlqReasonRejected      = "Offset rejected by client."
	dlqReasonDeliveryLimit = "Offset delivery count exceeded the threshold."
)

// dlqProduceVersion is the Produce version of the dead-letter writes.
const dlqProduceVersion = 9

// dlqWriteTimeout bounds one write of a batch (its retries included).
const dlqWriteTimeout = 15 * time.Second

// dlqReadBytes is how much of the source log one read for copies takes
// (Kafka's DLQ_MAX_FETCH_BYTES).
const dlqReadBytes = 1 << 20

// ErrDeadLetterTopic is wrapped when a group's dead-letter topic cannot
// be written for a retriable reason.
var ErrDeadLetterTopic = errors.New("broker: dead-letter topic not writable")

// deadLetterWriter is the producer state and the counts of this broker's
// dead-letter writes. The share manager calls it from one goroutine, so
// the producer state needs no lock; the counts are read by metrics.
type deadLetterWriter struct {
	producerID int64 // -1: none yet
	epoch      int16
	seq        map[dlqPartition]int32
	mu         struct {
		sync.Mutex
		counts map[string]*deadLetterCounts
	}
}

// dlqPartition is a partition of a dead-letter topic.
type dlqPartition struct {
	topic     coord.TopicID
	partition int32
}

// deadLetterCounts are a group's dead-letter records written and failed.
type deadLetterCounts struct{ written, failed int64 }

func newDeadLetterWriter() *deadLetterWriter {
	w := &deadLetterWriter{producerID: -1, seq: map[dlqPartition]int32{}}
	w.mu.counts = map[string]*deadLetterCounts{}
	return w
}

// count adds to a group's counts.
func (w *deadLetterWriter) count(group string, written, failed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mu.counts[group]
	if c == nil {
		c = &deadLetterCounts{}
		w.mu.counts[group] = c
	}
	c.written += int64(written)
	c.failed += int64(failed)
}

// counts returns a copy of the counts by group.
func (w *deadLetterWriter) counts() map[string]deadLetterCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]deadLetterCounts, len(w.mu.counts))
	for g, c := range w.mu.counts {
		out[g] = *c
	}
	return out
}

// writeShareDeadLetters is the share manager's share.DeadLetterFunc.
func (s *Server) writeShareDeadLetters(ctx context.Context, k share.Key, letters []share.DeadLetter) ([]int64, error) {
	w := s.shareDLQ
	all := func() []int64 {
		out := make([]int64, len(letters))
		for i, d := range letters {
			out[i] = d.Offset
		}
		return out
	}
	g := s.groupConfig(k.Group)
	if g.ShareDeadLetterTopic == "" {
		return all(), nil // the setting went away: archived uncopied
	}
	giveUp := func(why string, args ...any) ([]int64, error) {
		s.log.Warn("share: records archived without a dead-letter copy: "+why,
			append([]any{"group", k.Group, "partition", k.Partition, "dlq_topic", g.ShareDeadLetterTopic, "records", len(letters)}, args...)...)
		w.count(k.Group, 0, len(letters))
		return all(), nil
	}
	src := s.topicByID(coord.TopicID(k.TopicID))
	if src == nil || src.local(k.Partition) == nil {
		return giveUp("the source partition is gone")
	}
	dlq, err := s.deadLetterTopic(g.ShareDeadLetterTopic)
	if err != nil {
		var ke *kafkaError
		if errors.As(err, &ke) && !ke.err.Retriable {
			return giveUp("topic not usable", "err", err)
		}
		return nil, fmt.Errorf("%w: %w", ErrDeadLetterTopic, err)
	}
	var originals map[int64]segment.Record
	if g.ShareDeadLetterCopyRecord {
		if originals, err = s.readDeadLetterOriginals(src.local(k.Partition), letters); err != nil {
			return nil, fmt.Errorf("broker: reading records for dead-letter copies: %w", err)
		}
	}
	part := k.Partition % int32(len(dlq.parts))
	var settled []int64
	for _, chunk := range dlqChunks(letters, originals, dlq.cfg.maxMessageBytes) {
		recs := make([]segment.Record, len(chunk))
		now := s.nowFn().UnixMilli()
		for i, d := range chunk {
			recs[i] = deadLetterRecord(src.name, k, d, originals, now)
		}
		code, err := s.sendDeadLetters(ctx, dlq, part, recs)
		switch {
		case err != nil:
			return settled, err
		case code != 0:
			s.log.Warn("share: records archived without a dead-letter copy: the topic refused them",
				"group", k.Group, "partition", k.Partition, "dlq_topic", dlq.name, "records", len(chunk), "err", kerr.ErrorForCode(code))
			w.count(k.Group, 0, len(chunk))
		default:
			w.count(k.Group, len(chunk), 0)
		}
		for _, d := range chunk {
			settled = append(settled, d.Offset)
		}
	}
	return settled, nil
}

// deadLetterTopic returns the dead-letter topic name, creating it when
// the settings allow (Kafka's rules, see above). A kafkaError that is not
// retriable means the topic cannot be used.
func (s *Server) deadLetterTopic(name string) (*topicState, error) {
	if err := checkDeadLetterTopicName(name); err != nil {
		return nil, newKafkaError(kerr.InvalidTopicException, "%v", err)
	}
	if ts := s.topic(name); ts != nil {
		return ts, nil
	}
	prefix := s.cfg.Share.DeadLetterTopicPrefix
	switch {
	case !s.cfg.Share.DeadLetterAutoCreate:
		return nil, newKafkaError(kerr.InvalidTopicException, "dead-letter topic %q does not exist and errors.deadletterqueue.auto.create.topics.enable is false", name)
	case !strings.HasPrefix(name, prefix):
		return nil, newKafkaError(kerr.InvalidTopicException, "dead-letter topic %q does not exist and does not start with errors.deadletterqueue.topic.name.prefix %q", name, prefix)
	}
	ts, err := s.createTopic(createTopicSpec{name: name, partitions: -1, replFactor: -1})
	var te *kafkaError
	if errors.As(err, &te) && te.err == kerr.TopicAlreadyExists {
		s.applySnapshot(s.coord.Snapshot())
		if t := s.topic(name); t != nil {
			return t, nil
		}
		return nil, newKafkaError(kerr.UnknownTopicOrPartition, "dead-letter topic %q is being created or deleted", name)
	}
	if err == nil {
		s.log.Info("share: created dead-letter topic", "topic", name)
	}
	return ts, err
}

// checkDeadLetterTopicName checks an errors.deadletterqueue.topic.name:
// a legal topic name, not an internal one ("__" starts those, Kafka's
// rule).
func checkDeadLetterTopicName(name string) error {
	if name == "" {
		return nil
	}
	if strings.HasPrefix(name, "__") {
		return fmt.Errorf("the dead-letter topic %q may not start with __, the prefix of internal topics", name)
	}
	return validTopicName(name)
}

// readDeadLetterOriginals reads the source records of letters from p
// through the share fetch's read path. Offsets no longer in the log
// (compacted away, past retention) have no entry: their copy carries the
// headers alone.
func (s *Server) readDeadLetterOriginals(p *partition, letters []share.DeadLetter) (map[int64]segment.Record, error) {
	want := map[int64]bool{}
	for _, d := range letters {
		want[d.Offset] = true
	}
	out := map[int64]segment.Record{}
	last := letters[len(letters)-1].Offset
	for from := max(letters[0].Offset, p.logStart()); from <= last; {
		batches, err := s.shareRead(p, from, last+1, dlqReadBytes, 0)
		if err != nil {
			return nil, err
		}
		if len(batches) == 0 {
			break
		}
		for _, b := range batches {
			if b.Archive {
				continue // control batch: holds no record of ours
			}
			it, err := segment.NewRecordIter(b.raw, segment.DefaultMaxDecompressed)
			if err != nil {
				return nil, err
			}
			for {
				rec, ok, err := it.Next()
				if err != nil {
					return nil, err
				}
				if !ok {
					break
				}
				if want[rec.Offset] {
					out[rec.Offset] = rec
				}
			}
		}
		next := batches[len(batches)-1].Last + 1
		if next <= from {
			break
		}
		from = next
	}
	return out, nil
}

// deadLetterRecord is the dead-letter record of d.
func deadLetterRecord(topic string, k share.Key, d share.DeadLetter, originals map[int64]segment.Record, now int64) segment.Record {
	rec := segment.Record{Timestamp: now}
	if o, ok := originals[d.Offset]; ok {
		rec.Key, rec.Value = o.Key, o.Value
		rec.Headers = append(rec.Headers, o.Headers...)
	}
	reason := dlqReasonDeliveryLimit
	if d.Rejected {
		reason = dlqReasonRejected
	}
	rec.Headers = append(rec.Headers,
		segment.RecordHeader{Key: dlqHeaderTopic, Value: []byte(topic)},
		segment.RecordHeader{Key: dlqHeaderPartition, Value: []byte(strconv.Itoa(int(k.Partition)))},
		segment.RecordHeader{Key: dlqHeaderOffset, Value: []byte(strconv.FormatInt(d.Offset, 10))},
		segment.RecordHeader{Key: dlqHeaderGroup, Value: []byte(k.Group)},
		segment.RecordHeader{Key: dlqHeaderDeliveryCount, Value: []byte(strconv.Itoa(int(d.DeliveryCount)))},
		segment.RecordHeader{Key: dlqHeaderMessage, Value: []byte(reason)},
	)
	return rec
}

// dlqChunks splits letters into batches that stay well under the
// dead-letter topic's max.message.bytes (a record alone over it is sent
// alone, and refused).
func dlqChunks(letters []share.DeadLetter, originals map[int64]segment.Record, maxBytes int32) [][]share.DeadLetter {
	const overhead = 256 // a record's framing and dead-letter headers, generously
	budget := int(maxBytes) / 2
	var out [][]share.DeadLetter
	var cur []share.DeadLetter
	size := 0
	for _, d := range letters {
		n := overhead
		if o, ok := originals[d.Offset]; ok {
			n += len(o.Key) + len(o.Value)
			for _, h := range o.Headers {
				n += len(h.Key) + len(h.Value) + 8
			}
		}
		if len(cur) > 0 && size+n > budget {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, d)
		size += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// sendDeadLetters writes recs to partition part of dlq as one idempotent
// batch with acks=all, retrying the same batch on retriable errors until
// dlqWriteTimeout. It returns a Kafka error code that is final (the copy
// cannot be written), or an error to try again later.
func (s *Server) sendDeadLetters(ctx context.Context, dlq *topicState, part int32, recs []segment.Record) (int16, error) {
	w := s.shareDLQ
	if w.producerID < 0 {
		id, err := s.pids.Next()
		if err != nil {
			return 0, fmt.Errorf("broker: producer id for dead-letter writes: %w", err)
		}
		w.producerID, w.epoch, w.seq = id, 0, map[dlqPartition]int32{}
	}
	dp := dlqPartition{topic: dlq.id, partition: part}
	batch, err := segment.BuildBatch(segment.BatchSpec{Idempotent: true, ProducerID: w.producerID, ProducerEpoch: w.epoch, BaseSequence: w.seq[dp], Records: recs})
	if err != nil {
		return 0, fmt.Errorf("broker: building dead-letter batch: %w", err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = dlqProduceVersion, -1, int32(dlqWriteTimeout/time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = dlq.name
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	ctx, cancel := context.WithTimeout(ctx, dlqWriteTimeout)
	defer cancel()
	backoff := shareRetryBackoff
	var last error
	for {
		code, err := s.produceDeadLetterTo(ctx, dlq.name, part, req)
		switch {
		case err == nil && (code == 0 || code == kerr.DuplicateSequenceNumber.Code):
			w.seq[dp] += int32(len(recs))
			return 0, nil
		case err == nil && (code == kerr.OutOfOrderSequenceNumber.Code || code == kerr.InvalidProducerEpoch.Code || code == kerr.UnknownProducerID.Code):
			w.producerID = -1 // the next try starts a new producer
			return 0, fmt.Errorf("%w: %v", ErrDeadLetterTopic, kerr.ErrorForCode(code))
		case err == nil && !kerr.IsRetriable(kerr.ErrorForCode(code)):
			return code, nil
		case err == nil:
			last = kerr.ErrorForCode(code)
		default:
			last = err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			// The batch may have been appended: a new producer keeps
			// the next batch from being taken for a duplicate of it.
			// Its records are written again (at least once).
			w.producerID = -1
			return 0, fmt.Errorf("%w: %w (%w)", ErrDeadLetterTopic, last, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, shareRetryMaxBackoff)
	}
}

// produceDeadLetterTo sends a one-partition dead-letter Produce to the
// partition's leader and returns the partition's code.
func (s *Server) produceDeadLetterTo(ctx context.Context, topic string, part int32, req *kmsg.ProduceRequest) (int16, error) {
	pi, ok := s.coord.Snapshot().Partition(coord.TopicPartition{Topic: topic, Partition: part})
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, nil
	}
	leader := pi.State.Leader
	var resp *kmsg.ProduceResponse
	switch {
	case leader < 0:
		return kerr.LeaderNotAvailable.Code, nil
	case leader == s.cfg.BrokerID:
		resp = s.produceDeadLetterLocal(ctx, req)
	default:
		resp = req.ResponseKind().(*kmsg.ProduceResponse)
		if err := s.txnPeers.call(ctx, s, leader, req, resp, replpb.TransactionsClient.ProduceDeadLetter); err != nil {
			return 0, fmt.Errorf("broker %d: %w", leader, err)
		}
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("broker %d answered no partition", leader)
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

// produceDeadLetterLocal appends a dead-letter Produce's batches to the
// partitions this broker leads, through producePartition, and waits for
// their high watermark (acks=all) as handleProduce does. Unlike a
// client's, it is not authorized (a broker sends it) nor throttled, and
// never creates a topic.
func (s *Server) produceDeadLetterLocal(ctx context.Context, req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var waits []produceWait
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		ts := s.topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = rp.Partition, -1, -1, -1
			var err error
			var w *produceWait
			switch {
			case ts == nil:
				err = newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist", rt.Topic)
			case isInternalTopic(rt.Topic):
				err = newKafkaError(kerr.InvalidTopicException, "cannot append to internal topic %s", rt.Topic)
			default:
				w, err = s.producePartition(ctx, ts, req, rp.Partition, rp.Records, &sp)
			}
			if err != nil {
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
	deadline := s.nowFn().Add(time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond)
	for _, w := range waits {
		if err := s.awaitHighWatermark(ctx, w.p, w.epoch, w.target, w.minISR, deadline); err != nil {
			setProduceError(req.Version, &resp.Topics[w.topic].Partitions[w.part], err)
		}
	}
	return resp
}

// ProduceDeadLetter appends another broker's dead-letter copies to the
// partitions this broker leads.
func (t txnService) ProduceDeadLetter(ctx context.Context, msg *replpb.KafkaMessage) (*replpb.KafkaMessage, error) {
	req := kmsg.NewPtrProduceRequest()
	if err := t.decode(ctx, msg, req, 3, apis[0].max); err != nil {
		return nil, err
	}
	if req.Acks != -1 {
		return nil, status.Errorf(codes.InvalidArgument, "dead-letter produce with acks %d, want -1", req.Acks)
	}
	resp := t.s.produceDeadLetterLocal(ctx, req)
	return &replpb.KafkaMessage{Version: int32(req.Version), Body: resp.AppendTo(nil)}, nil
}
