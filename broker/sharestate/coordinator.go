package sharestate

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/segment"
)

// Topic is the internal topic that holds the share partitions' state.
const Topic = "__share_group_state"

// Errors of New and Load.
var (
	ErrClosed        = errors.New("sharestate: coordinator closed")
	ErrAlreadyLoaded = errors.New("sharestate: partition already loaded")
	ErrBadPartition  = errors.New("sharestate: partition out of range")
	ErrConfig        = errors.New("sharestate: invalid config")
	ErrLoad          = errors.New("sharestate: loading __share_group_state failed")
)

// Log is one partition of __share_group_state as the server hands it to
// Load: Append appends at the log end and returns once the batch is
// replicated to the in-sync replicas (acks=all); an error means the batch
// may or may not be in the log, and the coordinator then leaves its
// memory unchanged and answers with a retriable error. ReadCopy,
// LogStartOffset and LogEndOffset are used by Load only.
type Log interface {
	Append(batches []byte, o segment.AppendOptions) (segment.AppendResult, error)
	ReadCopy(offset int64, maxBytes int, maxOffset int64) ([]byte, error)
	LogStartOffset() int64
	LogEndOffset() int64
}

// Config configures a Coordinator.
type Config struct {
	// NumPartitions is the partition count of __share_group_state
	// (share.coordinator.state.topic.num.partitions, or the existing
	// topic's).
	NumPartitions int
	// UpdatesPerSnapshot is
	// share.coordinator.snapshot.update.records.per.snapshot: after this
	// many update records of a share partition its next write is a
	// snapshot (0: every write is one).
	UpdatesPerSnapshot int
	// PartitionExists says a topic partition exists; false answers
	// UNKNOWN_TOPIC_OR_PARTITION to Write and Read. Nil: every one does.
	PartitionExists func(topicID [16]byte, partition int32) bool
	// Now is the clock of the records' timestamps; nil: time.Now.
	Now func() time.Time
	// Logger receives the coordinator's log lines; nil discards.
	Logger *slog.Logger
}

// Coordinator is the share coordinator for the partitions of
// __share_group_state loaded into it; its methods are safe for concurrent
// use. mu guards the in-memory state and is never held across an append;
// each partition's writes are serialized by its writeMu (taken before mu),
// so the state a write was computed from is still the state when its
// append returns.
type Coordinator struct {
	cfg Config
	mu  struct {
		sync.Mutex
		closed     bool
		partitions map[int]*partition
	}
}

// partition is one loaded partition of __share_group_state.
type partition struct {
	id      int
	log     Log
	writeMu sync.Mutex
	// dropped is set when Close or Unload takes the partition away: a
	// load in progress stops at its next record, so a broker that shuts
	// down or loses the leadership does not wait for a replay nobody
	// will serve.
	dropped atomic.Bool
	// Guarded by Coordinator.mu:
	loading bool
	states  map[Key]*shareState
	// readEpochs are the leader epochs Read was asked with: a write or
	// read with an older one is fenced (in memory only, as Kafka).
	readEpochs map[Key]int32
}

// shareState is one share partition's state.
type shareState struct {
	snapshotEpoch    uint16
	stateEpoch       int32
	leaderEpoch      int32
	startOffset      int64
	deliveryComplete int32
	// batches is the whole state; sinceSnapshot the batches written
	// since the last snapshot, which each update record carries, so that
	// the last update record (all compaction keeps) holds them all.
	batches, sinceSnapshot []StateBatch
	updates                int
}

// New returns a coordinator that owns no partition yet.
func New(cfg Config) (*Coordinator, error) {
	if cfg.NumPartitions < 1 {
		return nil, fmt.Errorf("%w: NumPartitions %d", ErrConfig, cfg.NumPartitions)
	}
	if cfg.UpdatesPerSnapshot < 0 {
		return nil, fmt.Errorf("%w: UpdatesPerSnapshot %d", ErrConfig, cfg.UpdatesPerSnapshot)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Coordinator{cfg: cfg}
	c.mu.partitions = map[int]*partition{}
	return c, nil
}

// CoordinatorKey is Kafka's share coordinator key of a share partition
// (SharePartitionKey.asCoordinatorKey): "group:topicId:partition", the
// topic id as Kafka prints a Uuid (URL-safe base64 without padding).
func CoordinatorKey(k Key) string {
	return k.GroupID + ":" + base64.RawURLEncoding.EncodeToString(k.TopicID[:]) + ":" + strconv.Itoa(int(k.Partition))
}

// PartitionFor is the partition of __share_group_state that holds a share
// partition's state, as Kafka computes it: abs(Java String.hashCode of its
// coordinator key) % n.
func PartitionFor(k Key, n int) int { return group.PartitionFor(CoordinatorKey(k), n) }

// PartitionFor is PartitionFor with the coordinator's partition count.
func (c *Coordinator) PartitionFor(k Key) int { return PartitionFor(k, c.cfg.NumPartitions) }

// Close makes every later call answer COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.closed = true
	for _, p := range c.mu.partitions {
		p.dropped.Store(true)
	}
	c.mu.partitions = map[int]*partition{}
}

// Unload gives up a partition (its leadership moved away): its share
// partitions get NOT_COORDINATOR. A write in flight completes its append
// but changes nothing here.
func (c *Coordinator) Unload(partitionID int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.mu.partitions[partitionID]; p != nil {
		p.dropped.Store(true)
	}
	delete(c.mu.partitions, partitionID)
}

// Loaded reports whether a partition is loaded (and done loading).
func (c *Coordinator) Loaded(partitionID int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mu.partitions[partitionID]
	return p != nil && !p.loading
}

// owner returns the loaded partition of k, or the error k gets.
func (c *Coordinator) ownerLocked(k Key) (*partition, *kerr.Error) {
	if c.mu.closed {
		return nil, kerr.CoordinatorNotAvailable
	}
	p := c.mu.partitions[c.PartitionFor(k)]
	switch {
	case p == nil:
		return nil, kerr.NotCoordinator
	case p.loading:
		return nil, kerr.CoordinatorLoadInProgress
	}
	return p, nil
}

// fenceEpochLocked is the leader epoch a request of k must not be below.
func (p *partition) fenceEpochLocked(k Key) (int32, bool) {
	st, ok := p.states[k]
	e, rok := p.readEpochs[k]
	switch {
	case ok && rok:
		return max(st.leaderEpoch, e), true
	case ok:
		return st.leaderEpoch, true
	}
	return e, rok
}

// record is one record to append: a key and its value (nil: tombstone).
type record struct {
	typ int16
	val *value
}

// write appends the records of k to p's log as one batch.
func (c *Coordinator) write(p *partition, k Key, recs []record) *kerr.Error {
	ts := c.cfg.Now().UnixMilli()
	rs := make([]segment.Record, len(recs))
	for i, r := range recs {
		rs[i] = segment.Record{Timestamp: ts, Key: encodeKey(r.typ, k)}
		if r.val != nil {
			rs[i].Value = encodeValue(r.typ, *r.val)
		}
	}
	batch, err := segment.BuildBatch(segment.BatchSpec{PartitionLeaderEpoch: -1, Records: rs})
	if err != nil {
		c.cfg.Logger.Error("sharestate: building a record of __share_group_state failed", "key", CoordinatorKey(k), "err", err)
		return kerr.UnknownServerError
	}
	if _, err := p.log.Append(batch, segment.AppendOptions{LeaderEpoch: -1 /* the server's to set */}); err != nil {
		c.cfg.Logger.Warn("sharestate: append to __share_group_state failed", "key", CoordinatorKey(k), "partition", p.id, "err", err)
		return appendError(err)
	}
	return nil
}

// appendError is the Kafka error a caller gets for a failed append (as
// Kafka's coordinator runtime maps them).
func appendError(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
			return kerr.NotCoordinator
		case kerr.MessageTooLarge, kerr.RecordListTooLarge:
			return kerr.UnknownServerError
		}
	}
	return kerr.CoordinatorNotAvailable
}

// mutate runs one write of k: under p's write lock, plan computes the
// records and the state to keep from the current state (nil: none) or
// returns the error to answer; the records are appended, and on success
// the state becomes next (nil: deleted).
func (c *Coordinator) mutate(k Key, plan func(p *partition, cur *shareState) (recs []record, next *shareState, kerrV *kerr.Error)) *kerr.Error {
	c.mu.Lock()
	p, kerrV := c.ownerLocked(k)
	c.mu.Unlock()
	if kerrV != nil {
		return kerrV
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	c.mu.Lock()
	if cur, e := c.ownerLocked(k); e != nil || cur != p {
		c.mu.Unlock()
		return kerr.NotCoordinator
	}
	recs, next, kerrV := plan(p, p.states[k])
	c.mu.Unlock()
	if kerrV != nil {
		return kerrV
	}
	if e := c.write(p, k, recs); e != nil {
		return e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, e := c.ownerLocked(k); e != nil || cur != p {
		return kerr.NotCoordinator // appended, but no longer ours to serve
	}
	if next == nil {
		delete(p.states, k)
		delete(p.readEpochs, k)
	} else {
		p.states[k] = next
	}
	return nil
}

// snapshotOf is the snapshot value of st.
func snapshotOf(st *shareState) *value {
	return &value{SnapshotEpoch: st.snapshotEpoch, StateEpoch: st.stateEpoch, LeaderEpoch: st.leaderEpoch,
		StartOffset: st.startOffset, DeliveryCompleteCount: st.deliveryComplete, Batches: st.batches}
}

// WriteState is one share partition's WriteShareGroupState.
type WriteState struct {
	StateEpoch, LeaderEpoch int32
	StartOffset             int64 // -1: unchanged
	DeliveryCompleteCount   int32 // -1: unchanged
	Batches                 []StateBatch
}

// Write stores a write of k's state: an update record, or a snapshot when
// the state epoch changes, k has no state yet, or UpdatesPerSnapshot
// updates were written since the last snapshot. FENCED_LEADER_EPOCH for a
// leader epoch older than the last written or read (-1 is not checked),
// FENCED_STATE_EPOCH for a state epoch older than the stored one.
func (c *Coordinator) Write(k Key, w WriteState) *kerr.Error {
	if e := c.checkKey(k, true); e != nil {
		return e
	}
	return c.mutate(k, func(p *partition, cur *shareState) ([]record, *shareState, *kerr.Error) {
		if fence, ok := p.fenceEpochLocked(k); ok && w.LeaderEpoch != -1 && w.LeaderEpoch < fence {
			return nil, nil, kerr.FencedLeaderEpoch
		}
		if cur != nil && w.StateEpoch != -1 && w.StateEpoch < cur.stateEpoch {
			return nil, nil, kerr.FencedStateEpoch
		}
		if cur == nil {
			next := &shareState{stateEpoch: w.StateEpoch, leaderEpoch: w.LeaderEpoch, startOffset: w.StartOffset,
				deliveryComplete: w.DeliveryCompleteCount, batches: combine(nil, w.Batches, w.StartOffset)}
			return []record{{keySnapshot, snapshotOf(next)}}, next, nil
		}
		next := *cur
		if w.LeaderEpoch != -1 {
			next.leaderEpoch = w.LeaderEpoch
		}
		if w.StartOffset != -1 {
			next.startOffset = w.StartOffset
		}
		if w.DeliveryCompleteCount != -1 {
			next.deliveryComplete = w.DeliveryCompleteCount
		}
		next.batches = combine(cur.batches, w.Batches, next.startOffset)
		if (w.StateEpoch != -1 && w.StateEpoch != cur.stateEpoch) || cur.updates >= c.cfg.UpdatesPerSnapshot {
			if w.StateEpoch != -1 {
				next.stateEpoch = w.StateEpoch
			}
			next.snapshotEpoch++
			next.sinceSnapshot, next.updates = nil, 0
			return []record{{keySnapshot, snapshotOf(&next)}}, &next, nil
		}
		next.sinceSnapshot = combine(cur.sinceSnapshot, w.Batches, next.startOffset)
		next.updates++
		upd := &value{SnapshotEpoch: next.snapshotEpoch, StateEpoch: -1, LeaderEpoch: next.leaderEpoch, StartOffset: next.startOffset,
			DeliveryCompleteCount: next.deliveryComplete, Batches: next.sinceSnapshot}
		return []record{{keyUpdate, upd}}, &next, nil
	})
}

// Initialize starts k's state at a new state epoch and start offset (a
// snapshot without batches, so a delivery-complete count of 0).
// FENCED_STATE_EPOCH for a state epoch older than the stored one.
func (c *Coordinator) Initialize(k Key, stateEpoch int32, startOffset int64) *kerr.Error {
	if e := c.checkKey(k, false); e != nil {
		return e
	}
	return c.mutate(k, func(p *partition, cur *shareState) ([]record, *shareState, *kerr.Error) {
		next := &shareState{stateEpoch: stateEpoch, leaderEpoch: -1, startOffset: startOffset, deliveryComplete: 0}
		if cur != nil {
			if stateEpoch < cur.stateEpoch {
				return nil, nil, kerr.FencedStateEpoch
			}
			next.snapshotEpoch, next.leaderEpoch = cur.snapshotEpoch+1, cur.leaderEpoch
		}
		return []record{{keySnapshot, snapshotOf(next)}}, next, nil
	})
}

// Delete removes k's state: tombstones for its snapshot and update keys.
func (c *Coordinator) Delete(k Key) *kerr.Error {
	if e := c.checkKey(k, false); e != nil {
		return e
	}
	return c.mutate(k, func(*partition, *shareState) ([]record, *shareState, *kerr.Error) {
		return []record{{typ: keySnapshot}, {typ: keyUpdate}}, nil, nil
	})
}

// State is a share partition's state as Read and ReadSummary answer it.
type State struct {
	StateEpoch, LeaderEpoch int32
	StartOffset             int64
	DeliveryCompleteCount   int32
	Batches                 []StateBatch
}

// Read returns k's state (start offset -1 and state epoch 0 when it has
// none) and fences writes and reads with a leader epoch older than
// leaderEpoch. FENCED_LEADER_EPOCH when leaderEpoch itself is older than
// the last seen. With summary, the leader epoch is only checked.
func (c *Coordinator) Read(k Key, leaderEpoch int32, summary bool) (State, *kerr.Error) {
	if e := c.checkKey(k, true); e != nil {
		return State{}, e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, e := c.ownerLocked(k)
	if e != nil {
		return State{}, e
	}
	if fence, ok := p.fenceEpochLocked(k); ok && leaderEpoch != -1 && leaderEpoch < fence {
		return State{}, kerr.FencedLeaderEpoch
	}
	if !summary && leaderEpoch != -1 {
		if cur, ok := p.readEpochs[k]; !ok || cur < leaderEpoch {
			p.readEpochs[k] = leaderEpoch
		}
	}
	st := p.states[k]
	if st == nil {
		return State{StartOffset: -1, DeliveryCompleteCount: -1}, nil
	}
	out := State{StateEpoch: st.stateEpoch, LeaderEpoch: st.leaderEpoch, StartOffset: st.startOffset, DeliveryCompleteCount: st.deliveryComplete}
	if !summary {
		out.Batches = append([]StateBatch{}, st.batches...)
	}
	return out, nil
}

// checkKey validates a key as Kafka's shard does: INVALID_REQUEST for a
// zero topic id or a negative partition, UNKNOWN_TOPIC_OR_PARTITION (with
// exists) for a partition PartitionExists does not know.
func (c *Coordinator) checkKey(k Key, exists bool) *kerr.Error {
	switch {
	case k.TopicID == [16]byte{} || k.Partition < 0 || k.GroupID == "":
		return kerr.InvalidRequest
	case exists && c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(k.TopicID, k.Partition):
		return kerr.UnknownTopicOrPartition
	}
	return nil
}

// NumPartitions is the partition count of __share_group_state.
func (c *Coordinator) NumPartitions() int { return c.cfg.NumPartitions }

// ParseCoordinatorKey parses a coordinator key ("group:topicId:partition",
// as FindCoordinator key type 2 carries it), as Kafka's
// SharePartitionKey.getInstance: the last two fields are the topic id and
// the partition, the group id (which may hold ':') the rest.
func ParseCoordinatorKey(s string) (Key, error) {
	j := strings.LastIndexByte(s, ':')
	if j < 0 {
		return Key{}, fmt.Errorf("sharestate: coordinator key %q is not group:topicId:partition", s)
	}
	i := strings.LastIndexByte(s[:j], ':')
	if i <= 0 {
		return Key{}, fmt.Errorf("sharestate: coordinator key %q is not group:topicId:partition", s)
	}
	id, err := base64.RawURLEncoding.DecodeString(s[i+1 : j])
	if err != nil || len(id) != 16 {
		return Key{}, fmt.Errorf("sharestate: coordinator key %q: bad topic id", s)
	}
	p, err := strconv.ParseInt(s[j+1:], 10, 32)
	if err != nil || p < 0 {
		return Key{}, fmt.Errorf("sharestate: coordinator key %q: bad partition", s)
	}
	return Key{GroupID: s[:i], TopicID: [16]byte(id), Partition: int32(p)}, nil
}
