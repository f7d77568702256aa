package producer

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// CachedBatches is how many of a producer's latest batches a partition
// remembers for duplicate detection; Kafka's clients keep at most five
// requests in flight per connection when idempotent, for this reason.
const CachedBatches = 5

// BatchMeta describes one appended batch of an idempotent producer.
type BatchMeta struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	// Timestamp is the batch's max timestamp as stored: the broker's time
	// for a LogAppendTime batch, the largest record timestamp otherwise.
	Timestamp int64
}

// entry is one producer's state in a partition.
type entry struct {
	epoch   int16
	n       int // batches in use, oldest first; n >= 1 once stored
	batches [CachedBatches]BatchMeta
}

func (e *entry) last() *BatchMeta { return &e.batches[e.n-1] }

func (e *entry) push(b BatchMeta) {
	if e.n == CachedBatches {
		copy(e.batches[:], e.batches[1:])
		e.n--
	}
	e.batches[e.n] = b
	e.n++
}

// StateManager is the idempotent-producer state of one partition. Its
// methods are safe for concurrent use, but Check, the append and Update must
// form one step under the partition's append lock (see the package
// documentation).
type StateManager struct {
	mu struct {
		sync.Mutex
		producers map[int64]*entry
		// end is the offset up to which batches have been applied: the
		// next offset after the last Update, or the log end after Load.
		end int64
	}
}

// NewStateManager returns an empty state for a partition whose batches
// before offset end have all been accounted for (0 for a new partition; use
// Load for an existing log).
func NewStateManager(end int64) *StateManager {
	s := &StateManager{}
	s.mu.producers = make(map[int64]*entry)
	s.mu.end = end
	return s
}

// Check decides whether a batch fresh from a producer may be appended.
//
// It returns (nil, nil) to append; (dup, nil) when the batch repeats one of
// the producer's five cached batches, in which case the server must not
// append it and answers with dup's offsets (dup.FirstOffset as the base
// offset; dup.Timestamp as the log append time when the topic uses
// LogAppendTime); or an error wrapping a *kerr.Error (see ErrorCode):
// INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE
// or INVALID_RECORD. Check changes nothing.
func (s *StateManager) Check(h segment.Header) (dup *BatchMeta, err error) {
	if h.ProducerID < 0 {
		if h.Transactional() || h.Control() {
			return nil, kafkaErr(kerr.InvalidRecord, "transactional or control batch without a producer id")
		}
		return nil, nil
	}
	switch {
	case h.Control():
		return nil, kafkaErr(kerr.InvalidRecord, "producer %d sent a control batch", h.ProducerID)
	case h.Transactional():
		return nil, kafkaErr(kerr.InvalidTxnState, "producer %d sent a transactional batch; transactions are not supported", h.ProducerID)
	case h.ProducerEpoch < 0 || h.BaseSequence < 0 || h.LastOffsetDelta < 0:
		return nil, kafkaErr(kerr.InvalidRecord, "producer %d: epoch %d, base sequence %d", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	first := h.BaseSequence
	last := incrementSequence(first, h.LastOffsetDelta)

	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.mu.producers[h.ProducerID]
	if e == nil {
		return nil, nil // unknown producer: accepted at any sequence (KIP-360)
	}
	if h.ProducerEpoch == e.epoch {
		for i := range e.n {
			if b := e.batches[i]; b.FirstSeq == first && b.LastSeq == last {
				return &b, nil
			}
		}
	}
	switch {
	case h.ProducerEpoch < e.epoch:
		return nil, kafkaErr(kerr.InvalidProducerEpoch, "producer %d: epoch %d, current epoch %d", h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.ProducerEpoch > e.epoch:
		if first != 0 {
			return nil, kafkaErr(kerr.OutOfOrderSequenceNumber, "producer %d: new epoch %d starts at sequence %d, not 0", h.ProducerID, h.ProducerEpoch, first)
		}
	default:
		if want := incrementSequence(e.last().LastSeq, 1); first != want {
			return nil, kafkaErr(kerr.OutOfOrderSequenceNumber, "producer %d epoch %d: sequence %d, expected %d", h.ProducerID, h.ProducerEpoch, first, want)
		}
	}
	return nil, nil
}

// Update records a batch appended at baseOffset: after a successful
// append of a batch Check accepted, for every batch a follower replicates,
// and by Load's replay. h must describe the batch as stored: re-parse it
// after the append, or set h.MaxTimestamp to the log append time when the
// log rewrote it. Batches without a producer id only advance the offset the
// state reflects. Update does not validate: Check did.
func (s *StateManager) Update(h segment.Header, baseOffset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updateLocked(h, baseOffset)
}

func (s *StateManager) updateLocked(h segment.Header, baseOffset int64) {
	lastOffset := baseOffset + int64(h.LastOffsetDelta)
	s.mu.end = max(s.mu.end, lastOffset+1)
	if h.ProducerID < 0 {
		return
	}
	e := s.mu.producers[h.ProducerID]
	if e == nil {
		e = &entry{epoch: h.ProducerEpoch}
		s.mu.producers[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		e.epoch, e.n = h.ProducerEpoch, 0
	}
	e.push(BatchMeta{
		FirstSeq:    h.BaseSequence,
		LastSeq:     incrementSequence(h.BaseSequence, h.LastOffsetDelta),
		FirstOffset: baseOffset,
		LastOffset:  lastOffset,
		Timestamp:   h.MaxTimestamp,
	})
}

// TruncateHead forgets the producers whose last batch lies below
// logStart, after retention or DeleteRecords moved the log start (Kafka
// does the same). It returns how many were forgotten. Their next batch is
// accepted at any sequence.
func (s *StateManager) TruncateHead(logStart int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.truncateHeadLocked(logStart)
}

func (s *StateManager) truncateHeadLocked(logStart int64) int {
	n := 0
	for pid, e := range s.mu.producers {
		if e.last().LastOffset < logStart {
			delete(s.mu.producers, pid)
			n++
		}
	}
	return n
}

// ExpireProducers forgets the producers whose last batch's timestamp is at
// least expiration (producer.id.expiration.ms, Kafka's default 24 h) before
// now, and returns how many. Like Kafka it compares the batch's timestamp,
// which is the client's clock unless the topic uses LogAppendTime.
func (s *StateManager) ExpireProducers(now time.Time, expiration time.Duration) int {
	cutoff := now.UnixMilli() - expiration.Milliseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for pid, e := range s.mu.producers {
		if e.last().Timestamp <= cutoff {
			delete(s.mu.producers, pid)
			n++
		}
	}
	return n
}

// Producer returns what the partition knows of one producer: its epoch and
// its cached batches, oldest first.
func (s *StateManager) Producer(pid int64) (epoch int16, batches []BatchMeta, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.mu.producers[pid]
	if e == nil {
		return -1, nil, false
	}
	return e.epoch, slices.Clone(e.batches[:e.n]), true
}

// ProducerIDs returns the ids of the producers the partition knows, sorted.
func (s *StateManager) ProducerIDs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]int64, 0, len(s.mu.producers))
	for pid := range s.mu.producers {
		ids = append(ids, pid)
	}
	slices.Sort(ids)
	return ids
}

// End returns the offset up to which batches have been applied.
func (s *StateManager) End() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.end
}

// incrementSequence adds n to a sequence number, wrapping past MaxInt32 to
// 0 as Kafka's DefaultRecordBatch.incrementSequence does.
func incrementSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}
