package producer

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
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

// CompletedTxn is a transaction that a marker ended in the partition.
type CompletedTxn struct {
	ProducerID  int64
	FirstOffset int64 // the transaction's first offset in the partition
	LastOffset  int64 // the marker's offset
	Aborted     bool
	// LastStableOffset is the partition's last stable offset once this
	// transaction completed, ignoring the high watermark: the first
	// offset of the earliest other open transaction, else LastOffset+1
	// (Kafka's lastStableOffset(completedTxn)).
	LastStableOffset int64
}

// AbortedTxn returns the transaction's entry for the aborted-transaction
// index.
func (c CompletedTxn) AbortedTxn() segment.AbortedTxn {
	return segment.AbortedTxn{ProducerID: c.ProducerID, FirstOffset: c.FirstOffset, LastOffset: c.LastOffset, LastStableOffset: c.LastStableOffset}
}

// entry is one producer's state in a partition.
type entry struct {
	epoch   int16
	n       int // data batches with sequences in use, oldest first
	batches [CachedBatches]BatchMeta
	// coordEpoch is the coordinator epoch of the producer's last marker
	// in the partition, -1 before one.
	coordEpoch int32
	// txnFirst is the first offset of the producer's ongoing transaction
	// in the partition, -1 when none (Kafka's currentTxnFirstOffset).
	txnFirst int64
	// lastOffset and lastTs are those of the producer's last batch, data
	// or marker.
	lastOffset, lastTs int64
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

func newEntry(epoch int16) *entry { return &entry{epoch: epoch, coordEpoch: -1, txnFirst: -1} }

// StateManager is the producer state of one partition: idempotence and
// transactions. Its methods are safe for concurrent use, but Check, the
// append and Update (or CheckMarker, the append and ApplyMarker) must form
// one step under the partition's append lock (see the package
// documentation).
type StateManager struct {
	// unstable is len(mu.ongoing) + len(mu.unreplicated), kept so that
	// LastStableOffset of a partition without transactions (every fetch
	// asks) takes no lock.
	unstable atomic.Int64
	mu       struct {
		sync.Mutex
		producers map[int64]*entry
		// end is the offset up to which batches have been applied: the
		// next offset after the last Update, or the log end after Load.
		end int64
		// unreplicated are completed transactions whose marker may not
		// be below the high watermark yet, in marker order: they hold
		// the last stable offset at their first offset until it is
		// (Kafka's unreplicatedTxns).
		unreplicated []CompletedTxn
		// ongoing maps the producers with an open transaction to its
		// first offset (the entries' txnFirst), so that the last
		// stable offset does not scan every producer.
		ongoing map[int64]int64
		// markers counts the markers applied to each producer (never
		// reset while the producer is known): KIP-890 verification
		// compares it before and after asking the coordinator.
		markers map[int64]uint64
		// holding is the log end at which a transactional batch that
		// may open its producer's transaction is being appended
		// (HoldAppend), or -1: it holds the last stable offset.
		holding int64
	}
}

// NewStateManager returns an empty state for a partition whose batches
// before offset end have all been accounted for (0 for a new partition; use
// Load for an existing log).
func NewStateManager(end int64) *StateManager {
	s := &StateManager{}
	s.mu.producers = make(map[int64]*entry)
	s.mu.markers = make(map[int64]uint64)
	s.mu.ongoing = make(map[int64]int64)
	s.mu.end = end
	s.mu.holding = -1
	return s
}

// noteUnstableLocked refreshes s.unstable after the open or unreplicated
// transactions changed.
func (s *StateManager) noteUnstableLocked() {
	n := len(s.mu.ongoing) + len(s.mu.unreplicated)
	if s.mu.holding >= 0 {
		n++
	}
	s.unstable.Store(int64(n))
}

// HoldAppend holds the last stable offset at offset, the log end, while
// the caller (holding the partition's append lock) appends a
// transactional batch of pid: the log makes a batch readable before its
// append returns (followers fetch it and their acknowledgements may move
// the high watermark past it while the append waits for its fsync), and
// only the Update after the append records the transaction it opens. It
// reports whether it holds: false when pid's transaction is already open
// (which holds the last stable offset at its first offset). The caller
// calls ReleaseAppend after Update, or after a failed append.
func (s *StateManager) HoldAppend(pid, offset int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.mu.producers[pid]; e != nil && e.txnFirst >= 0 {
		return false
	}
	s.mu.holding = offset
	s.noteUnstableLocked()
	return true
}

// ReleaseAppend ends the hold of HoldAppend.
func (s *StateManager) ReleaseAppend() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.holding = -1
	s.noteUnstableLocked()
}

// setProducersLocked installs producers (from a snapshot or a rebuild)
// and derives the open transactions from them.
func (s *StateManager) setProducersLocked(producers map[int64]*entry) {
	s.mu.producers = producers
	s.mu.ongoing = make(map[int64]int64)
	for pid, e := range producers {
		if e.txnFirst >= 0 {
			s.mu.ongoing[pid] = e.txnFirst
		}
	}
	s.noteUnstableLocked()
}

// Check decides whether a batch fresh from a producer may be appended.
//
// It returns (nil, nil) to append; (dup, nil) when the batch repeats one of
// the producer's five cached batches, in which case the server must not
// append it and answers with dup's offsets (dup.FirstOffset as the base
// offset; dup.Timestamp as the log append time when the topic uses
// LogAppendTime); or an error wrapping a *kerr.Error (see ErrorCode):
// INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE
// (a non-transactional batch while the producer's transaction is open) or
// INVALID_RECORD. Check changes nothing.
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
	case e.n == 0:
		// Known only by markers or sequence-less batches: as unknown.
	default:
		if want := incrementSequence(e.last().LastSeq, 1); first != want {
			return nil, kafkaErr(kerr.OutOfOrderSequenceNumber, "producer %d epoch %d: sequence %d, expected %d", h.ProducerID, h.ProducerEpoch, first, want)
		}
	}
	if e.txnFirst >= 0 && !h.Transactional() {
		return nil, kafkaErr(kerr.InvalidTxnState, "producer %d sent a non-transactional batch while its transaction from offset %d is open", h.ProducerID, e.txnFirst)
	}
	return nil, nil
}

// Update records a data batch appended at baseOffset: after a successful
// append of a batch Check accepted, for every batch a follower replicates,
// and by Load's replay. h must describe the batch as stored: re-parse it
// after the append, or set h.MaxTimestamp to the log append time when the
// log rewrote it. Batches without a producer id only advance the offset the
// state reflects, and so do control batches: their marker is applied with
// ApplyMarker. A transactional batch opens the producer's transaction when
// none is open. A batch with base sequence -1 (the group coordinator's
// transactional offset commits) is applied without sequence bookkeeping.
// Update does not validate: Check did.
func (s *StateManager) Update(h segment.Header, baseOffset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updateLocked(h, baseOffset)
}

func (s *StateManager) updateLocked(h segment.Header, baseOffset int64) {
	lastOffset := baseOffset + int64(h.LastOffsetDelta)
	s.mu.end = max(s.mu.end, lastOffset+1)
	if h.ProducerID < 0 || h.Control() {
		return
	}
	e := s.entryLocked(h.ProducerID, h.ProducerEpoch)
	if h.ProducerEpoch != e.epoch {
		e.epoch, e.n = h.ProducerEpoch, 0
	}
	if h.BaseSequence >= 0 {
		e.push(BatchMeta{
			FirstSeq:    h.BaseSequence,
			LastSeq:     incrementSequence(h.BaseSequence, h.LastOffsetDelta),
			FirstOffset: baseOffset,
			LastOffset:  lastOffset,
			Timestamp:   h.MaxTimestamp,
		})
	}
	e.lastOffset, e.lastTs = lastOffset, h.MaxTimestamp
	if h.Transactional() && e.txnFirst < 0 {
		e.txnFirst = baseOffset
		s.mu.ongoing[h.ProducerID] = baseOffset
		s.noteUnstableLocked()
	}
}

func (s *StateManager) entryLocked(pid int64, epoch int16) *entry {
	e := s.mu.producers[pid]
	if e == nil {
		e = newEntry(epoch)
		s.mu.producers[pid] = e
	}
	return e
}

// CheckMarker decides whether the leader may append a transaction marker
// for the producer written by a coordinator of coordinatorEpoch:
// INVALID_PRODUCER_EPOCH when epoch is below the producer's,
// TRANSACTION_COORDINATOR_FENCED when coordinatorEpoch is below that of
// the producer's last marker (Kafka's ProducerAppendInfo rules). A
// marker of transaction version 2 (bumped: its EndTxn bumped the epoch)
// must also have an epoch above that of a transaction open in the
// partition, else it is stale and INVALID_PRODUCER_EPOCH. A producer the
// partition does not know passes.
func (s *StateManager) CheckMarker(producerID int64, epoch int16, coordinatorEpoch int32, bumped bool) error {
	if producerID < 0 || epoch < 0 {
		return kafkaErr(kerr.InvalidRecord, "marker for producer %d epoch %d", producerID, epoch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.mu.producers[producerID]
	if e == nil {
		return nil
	}
	if epoch < e.epoch {
		return kafkaErr(kerr.InvalidProducerEpoch, "marker for producer %d: epoch %d, current epoch %d", producerID, epoch, e.epoch)
	}
	if bumped && e.txnFirst >= 0 && epoch <= e.epoch {
		return kafkaErr(kerr.InvalidProducerEpoch, "marker of transaction version 2 for producer %d: epoch %d is not above the open transaction's %d", producerID, epoch, e.epoch)
	}
	if coordinatorEpoch < e.coordEpoch {
		return kafkaErr(kerr.TransactionCoordinatorFenced, "marker for producer %d: coordinator epoch %d, last marker's %d", producerID, coordinatorEpoch, e.coordEpoch)
	}
	return nil
}

// ApplyMarker records the marker m of the control batch h appended at
// offset (leader, follower and replay alike). It ends the producer's open
// transaction: the completed transaction is returned with ok, for the
// aborted-transaction index when it aborted; a marker of a producer with
// no open transaction (an empty transaction) returns ok false, as in
// Kafka. The transaction holds the last stable offset until
// LastStableOffset is given a high watermark past the marker.
func (s *StateManager) ApplyMarker(h segment.Header, m segment.ControlRecord, offset int64) (CompletedTxn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.end = max(s.mu.end, offset+int64(h.LastOffsetDelta)+1)
	if h.ProducerID < 0 {
		return CompletedTxn{}, false
	}
	return s.applyMarkerLocked(h.ProducerID, h.ProducerEpoch, m, offset, h.MaxTimestamp)
}

func (s *StateManager) applyMarkerLocked(pid int64, epoch int16, m segment.ControlRecord, offset, ts int64) (CompletedTxn, bool) {
	e := s.entryLocked(pid, epoch)
	if epoch > e.epoch {
		e.epoch, e.n = epoch, 0
	}
	e.coordEpoch = m.CoordinatorEpoch
	e.lastOffset, e.lastTs = offset, ts
	s.mu.markers[pid]++
	if e.txnFirst < 0 {
		return CompletedTxn{}, false
	}
	c := CompletedTxn{ProducerID: pid, FirstOffset: e.txnFirst, LastOffset: offset, Aborted: !m.Commit()}
	e.txnFirst = -1
	delete(s.mu.ongoing, pid)
	// Kafka's lastStableOffset(completedTxn): the first offset of the
	// earliest other open transaction.
	c.LastStableOffset = offset + 1
	for _, first := range s.mu.ongoing {
		c.LastStableOffset = min(c.LastStableOffset, first)
	}
	s.mu.unreplicated = append(s.mu.unreplicated, c)
	s.noteUnstableLocked()
	return c, true
}

// firstUnstableLocked is the smallest first offset of the open and the
// unreplicated transactions.
func (s *StateManager) firstUnstableLocked() (int64, bool) {
	first, ok := int64(math.MaxInt64), false
	if s.mu.holding >= 0 {
		first, ok = s.mu.holding, true
	}
	for _, f := range s.mu.ongoing {
		if f < first {
			first, ok = f, true
		}
	}
	for _, c := range s.mu.unreplicated {
		if c.FirstOffset < first {
			first, ok = c.FirstOffset, true
		}
	}
	return first, ok
}

// FirstUnstableOffset returns the first offset of the earliest transaction
// that is open or whose marker is not known to be replicated; ok is false
// when there is none.
func (s *StateManager) FirstUnstableOffset() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstUnstableLocked()
}

// LastStableOffset returns the partition's last stable offset for the high
// watermark hw: min(hw, the first unstable offset). Completed
// transactions whose marker is below hw stop holding it (Kafka's
// onHighWatermarkUpdated).
func (s *StateManager) LastStableOffset(hw int64) int64 {
	if s.unstable.Load() == 0 {
		return hw
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.unreplicated = slices.DeleteFunc(s.mu.unreplicated, func(c CompletedTxn) bool { return c.LastOffset < hw })
	s.noteUnstableLocked()
	if fu, ok := s.firstUnstableLocked(); ok && fu < hw {
		return fu
	}
	return hw
}

// InTransaction reports whether the producer has an open transaction in
// the partition, at which epoch, and how many markers the partition has
// applied for it. A first transactional batch (not in a transaction at
// its epoch) is verified with the coordinator (KIP-890) outside the
// append lock; the caller compares the marker count under the lock
// afterwards to see that no marker came between.
func (s *StateManager) InTransaction(pid int64) (open bool, epoch int16, markers uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.mu.producers[pid]
	if e == nil || e.txnFirst < 0 {
		return false, -1, s.mu.markers[pid]
	}
	return true, e.epoch, s.mu.markers[pid]
}

// TruncateHead forgets the producers whose last batch lies below
// logStart, after retention or DeleteRecords moved the log start (Kafka
// does the same), except those with an open transaction, and the
// completed transactions below it. It returns how
// many producers were forgotten. Their next batch is accepted at any
// sequence.
func (s *StateManager) TruncateHead(logStart int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.truncateHeadLocked(logStart)
}

func (s *StateManager) truncateHeadLocked(logStart int64) int {
	n := 0
	for pid, e := range s.mu.producers {
		// A producer with an open transaction stays: its transaction
		// holds the last stable offset until its marker, which must
		// find it (Kafka keeps the ongoing transaction too).
		if e.lastOffset < logStart && e.txnFirst < 0 {
			delete(s.mu.producers, pid)
			delete(s.mu.markers, pid)
			n++
		}
	}
	s.mu.unreplicated = slices.DeleteFunc(s.mu.unreplicated, func(c CompletedTxn) bool { return c.LastOffset < logStart })
	s.noteUnstableLocked()
	return n
}

// ExpireProducers forgets the producers whose last batch's timestamp is at
// least expiration (producer.id.expiration.ms, Kafka's default 24 h) before
// now and that have no open transaction, and returns how many. Like Kafka
// it compares the batch's timestamp, which is the client's clock unless
// the topic uses LogAppendTime.
func (s *StateManager) ExpireProducers(now time.Time, expiration time.Duration) int {
	cutoff := now.UnixMilli() - expiration.Milliseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for pid, e := range s.mu.producers {
		if e.txnFirst < 0 && e.lastTs <= cutoff {
			delete(s.mu.producers, pid)
			delete(s.mu.markers, pid)
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

// ProducerInfo is a producer as DescribeProducers shows it.
type ProducerInfo struct {
	ProducerID       int64
	Epoch            int16
	LastSequence     int32 // -1 without a sequenced batch
	LastTimestamp    int64
	CoordinatorEpoch int32 // -1 before a marker
	TxnStartOffset   int64 // -1 without an open transaction
}

// Describe returns every producer the partition knows, by id.
func (s *StateManager) Describe() []ProducerInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ProducerInfo, 0, len(s.mu.producers))
	for pid, e := range s.mu.producers {
		pi := ProducerInfo{ProducerID: pid, Epoch: e.epoch, LastSequence: -1, LastTimestamp: e.lastTs, CoordinatorEpoch: e.coordEpoch, TxnStartOffset: e.txnFirst}
		if e.n > 0 {
			pi.LastSequence = e.last().LastSeq
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return int(min(max(a.ProducerID-b.ProducerID, -1), 1)) })
	return out
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
