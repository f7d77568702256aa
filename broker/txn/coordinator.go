package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/segment"
)

// Topic is the internal topic that holds the transactions' state.
const Topic = "__transaction_state"

// Errors of New and Load.
var (
	ErrClosed        = errors.New("txn: coordinator closed")
	ErrAlreadyLoaded = errors.New("txn: partition already loaded")
	ErrBadPartition  = errors.New("txn: partition out of range")
	ErrConfig        = errors.New("txn: invalid config")
)

// Log is one partition of __transaction_state as the server hands it to
// Load (group.Log's contract): Append appends at the log end and returns
// once the batch is replicated to the in-sync replicas (acks=all); an error
// means the batch may or may not be in the log, and the coordinator then
// leaves its memory unchanged and answers the client with a retriable
// error. ReadCopy, LogStartOffset and LogEndOffset are used by Load only.
type Log interface {
	Append(batches []byte, o segment.AppendOptions) (segment.AppendResult, error)
	ReadCopy(offset int64, maxBytes int, maxOffset int64) ([]byte, error)
	LogStartOffset() int64
	LogEndOffset() int64
}

// MarkerBatch is the transaction markers of one transaction: a commit or
// abort marker for each of Partitions, with the producer's id and epoch
// and the coordinator's epoch.
type MarkerBatch struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Partitions       []TopicPartition
	// TransactionVersion is the transaction's version
	// (WriteTxnMarkers v2): with 2 the marker's epoch is the bumped one,
	// above the epoch of the transaction's records.
	TransactionVersion int8
}

// MarkerResult is the outcome of one partition's marker: a Kafka error
// code (0: written and replicated), or Gone when the partition no longer
// exists in the cluster (deleted), whose marker is then dropped as Kafka
// does.
type MarkerResult struct {
	Code int16
	Gone bool
}

// MarkerWriter writes markers to the partitions' leaders (the server's
// WriteTxnMarkers, in process or over the inter-broker RPC). A partition
// missing from the result is retried. WriteMarkers returns early when ctx
// is done.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, b MarkerBatch) map[TopicPartition]MarkerResult
}

// Config configures a Coordinator.
type Config struct {
	// NumPartitions is the partition count of __transaction_state
	// (transaction.state.log.num.partitions, or the existing topic's).
	NumPartitions int
	// MaxTimeout is transaction.max.timeout.ms.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms.
	IDExpiration time.Duration
	// AbortInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms.
	AbortInterval time.Duration
	// ExpireInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms.
	ExpireInterval time.Duration
	// NewProducerID hands out a producer id never handed out before.
	NewProducerID func() (int64, error)
	// Markers writes transaction markers.
	Markers MarkerWriter
	// MarkerBackoff is the first wait before markers are retried; it
	// doubles up to MaxMarkerBackoff. Zero: 50 ms and 2 s.
	MarkerBackoff, MaxMarkerBackoff time.Duration
	// EndWait bounds how long EndTxn, once the prepare record is stored,
	// waits for the transaction to complete (every marker written and
	// CompleteCommit or CompleteAbort stored) before it answers, so the
	// producer's next transaction finds the previous one complete instead
	// of retrying its first AddPartitionsToTxn on CONCURRENT_TRANSACTIONS.
	// Zero answers at once, as Kafka does. Either answer means the same:
	// the outcome is decided and will be completed.
	EndWait time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Logger receives the coordinator's log lines; nil discards.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.NumPartitions < 1:
		return fmt.Errorf("%w: NumPartitions %d", ErrConfig, c.NumPartitions)
	case c.MaxTimeout < time.Millisecond:
		return fmt.Errorf("%w: MaxTimeout %v", ErrConfig, c.MaxTimeout)
	case c.IDExpiration < time.Millisecond || c.AbortInterval < time.Millisecond || c.ExpireInterval < time.Millisecond:
		return fmt.Errorf("%w: expiration and intervals must be at least 1ms", ErrConfig)
	case c.NewProducerID == nil || c.Markers == nil:
		return fmt.Errorf("%w: NewProducerID and Markers are required", ErrConfig)
	}
	if c.MarkerBackoff <= 0 {
		c.MarkerBackoff = 50 * time.Millisecond
	}
	if c.MaxMarkerBackoff < c.MarkerBackoff {
		c.MaxMarkerBackoff = max(2*time.Second, c.MarkerBackoff)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Coordinator is the transaction coordinator for the partitions of
// __transaction_state loaded into it. Its methods are safe for concurrent
// use. One lock guards the in-memory state; it is never held across a log
// append or a marker write: a transactional id with a write in flight has
// a pending state, and other requests for it get CONCURRENT_TRANSACTIONS,
// as in Kafka.
type Coordinator struct {
	cfg Config

	mu struct {
		sync.Mutex
		closed     bool
		partitions map[int]*partition // loading or loaded
		txns       map[string]*entry  // of loaded partitions
		// added is broadcast when the write of an added partition
		// (pending Ongoing) ends: AddPartitionsV2 waits for it.
		added *sync.Cond
	}

	stop    chan struct{}
	wg      sync.WaitGroup // timer loop and marker senders
	senders atomic.Int32   // marker senders running
}

// partition is one loaded partition of __transaction_state.
type partition struct {
	id      int
	epoch   int32 // coordinator epoch: the partition's leader epoch
	loading bool  // requests get COORDINATOR_LOAD_IN_PROGRESS
	log     Log
	ctx     context.Context // done when unloaded: marker senders stop
	cancel  context.CancelFunc
}

// entry is one transactional id in memory.
type entry struct {
	md      Metadata // as the log has it
	p       *partition
	pending State // the state being written; noPending when none
}

// noPending marks an entry with no write in flight.
const noPending State = -1

// New returns a coordinator that owns no partition yet: every request
// answers NOT_COORDINATOR until Load has loaded the id's partition.
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, stop: make(chan struct{})}
	c.mu.added = sync.NewCond(&c.mu.Mutex)
	c.mu.partitions = map[int]*partition{}
	c.mu.txns = map[string]*entry{}
	c.wg.Add(1)
	go c.timers()
	return c, nil
}

// PartitionFor returns the partition of __transaction_state that holds a
// transactional id, as Kafka computes it: abs(Java String.hashCode(id)) % n.
func PartitionFor(id string, n int) int {
	var h int32
	for _, u := range utf16.Encode([]rune(id)) {
		h = 31*h + int32(u)
	}
	if h == math.MinInt32 { // Kafka's Utils.abs
		h = 0
	} else if h < 0 {
		h = -h
	}
	return int(h) % n
}

// PartitionFor is PartitionFor under the coordinator's NumPartitions.
func (c *Coordinator) PartitionFor(id string) int { return PartitionFor(id, c.cfg.NumPartitions) }

// NumPartitions is the partition count the coordinator was built with.
func (c *Coordinator) NumPartitions() int { return c.cfg.NumPartitions }

// MaxTimeout is transaction.max.timeout.ms.
func (c *Coordinator) MaxTimeout() time.Duration { return c.cfg.MaxTimeout }

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// lookupLocked finds the partition and entry of id, or the Kafka error
// that keeps the coordinator from serving it: COORDINATOR_NOT_AVAILABLE
// after Close, NOT_COORDINATOR for a partition it does not own,
// COORDINATOR_LOAD_IN_PROGRESS while the partition loads. The entry is nil
// when the id is unknown.
func (c *Coordinator) lookupLocked(id string) (*partition, *entry, *kerr.Error) {
	if c.mu.closed {
		return nil, nil, kerr.CoordinatorNotAvailable
	}
	p := c.mu.partitions[c.PartitionFor(id)]
	switch {
	case p == nil:
		return nil, nil, kerr.NotCoordinator
	case p.loading:
		return nil, nil, kerr.CoordinatorLoadInProgress
	}
	return p, c.mu.txns[id], nil
}

// Status is the Kafka error that keeps the coordinator from serving id
// (lookupLocked's), or nil.
func (c *Coordinator) Status(id string) *kerr.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _, ke := c.lookupLocked(id)
	return ke
}

// current reports whether e is still the live entry of its id on a
// loaded partition.
func (c *Coordinator) currentLocked(e *entry) bool {
	return !c.mu.closed && c.mu.partitions[e.p.id] == e.p && c.mu.txns[e.md.TransactionalID] == e
}

// write appends one record (next, or a tombstone when next is nil) for
// id to p's log and maps a failure to the Kafka error the client gets, as
// Kafka's TransactionStateManager.appendTransactionToLog does.
func (c *Coordinator) write(p *partition, id string, next *Metadata) *kerr.Error {
	rec := segment.Record{Timestamp: c.nowMs(), Key: EncodeKey(id)}
	if next != nil {
		rec.Value = EncodeValue(*next)
	}
	batch, err := segment.BuildBatch(segment.BatchSpec{PartitionLeaderEpoch: -1, Records: []segment.Record{rec}})
	if err != nil {
		c.cfg.Logger.Error("txn: building a record of __transaction_state failed", "transactional_id", id, "err", err)
		return kerr.UnknownServerError
	}
	if _, err := p.log.Append(batch, segment.AppendOptions{LeaderEpoch: -1 /* the server's to set */}); err != nil {
		c.cfg.Logger.Warn("txn: append to __transaction_state failed", "transactional_id", id, "partition", p.id, "err", err)
		return appendError(err)
	}
	return nil
}

// appendError is the Kafka error a client gets for a failed append.
func appendError(err error) *kerr.Error {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.CoordinatorNotAvailable
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return kerr.UnknownServerError
	}
	return kerr.CoordinatorNotAvailable
}

// commit writes next for e, whose pending state the caller set under the
// lock, and makes it e's state once appended. NOT_COORDINATOR when the
// partition was unloaded meanwhile.
func (c *Coordinator) commit(e *entry, next Metadata) *kerr.Error {
	if !CanTransition(e.md.State, next.State) {
		// A bug: Kafka throws IllegalStateException here.
		c.cfg.Logger.Error("txn: illegal transition refused", "transactional_id", next.TransactionalID, "from", e.md.State, "to", next.State)
		c.mu.Lock()
		e.pending = noPending
		c.mu.added.Broadcast()
		c.mu.Unlock()
		return kerr.UnknownServerError
	}
	ke := c.write(e.p, next.TransactionalID, &next)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.pending == Ongoing {
		defer c.mu.added.Broadcast()
	}
	e.pending = noPending
	if ke != nil {
		return ke
	}
	if !c.currentLocked(e) {
		return kerr.NotCoordinator
	}
	e.md = next
	return nil
}

// epochExhausted is Kafka's limit: an epoch at or above it is not bumped;
// the producer gets a new id.
const epochExhausted = math.MaxInt16 - 1

func isEpochExhausted(e int16) bool { return e >= epochExhausted }

// InitProducerID serves InitProducerId for a transactional id (Kafka's
// TransactionCoordinator.handleInitProducerId). pid and epoch are the
// producer's current id and epoch (KIP-360, v3+), or -1 and -1. It returns
// the producer id and epoch to use, or a Kafka error: INVALID_REQUEST for
// an empty id, INVALID_TRANSACTION_TIMEOUT, CONCURRENT_TRANSACTIONS while a
// transaction ends (an ongoing one is aborted first, with the epoch bumped,
// and the client retries), PRODUCER_FENCED, and lookupLocked's.
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, pid int64, epoch int16) (int64, int16, *kerr.Error) {
	if id == "" {
		return -1, -1, kerr.InvalidRequest
	}
	if timeoutMs <= 0 || int64(timeoutMs) > c.cfg.MaxTimeout.Milliseconds() {
		return -1, -1, kerr.InvalidTransactionTimeout
	}
	given := pid != -1 || epoch != -1
	c.mu.Lock()
	_, e, ke := c.lookupLocked(id)
	if ke != nil {
		c.mu.Unlock()
		return -1, -1, ke
	}
	if e == nil {
		// The allocator may reserve a block on disk: not under the lock.
		// (Another request may create the entry meanwhile: the id drawn
		// here then goes unused, as in Kafka.)
		c.mu.Unlock()
		newID, err := c.cfg.NewProducerID()
		if err != nil {
			c.cfg.Logger.Error("txn: no producer id available", "err", err)
			return -1, -1, kerr.CoordinatorLoadInProgress
		}
		c.mu.Lock()
		var p *partition
		if p, e, ke = c.lookupLocked(id); ke != nil {
			c.mu.Unlock()
			return -1, -1, ke
		}
		if e == nil {
			e = &entry{p: p, pending: noPending, md: Metadata{
				TransactionalID: id, ProducerID: newID, ProducerEpoch: -1,
				LastProducerID: -1, LastProducerEpoch: -1, TimeoutMs: timeoutMs,
				State: Empty, Partitions: map[TopicPartition]struct{}{}, StartMs: -1, LastUpdateMs: c.nowMs(),
				NextProducerID: -1,
			}}
			c.mu.txns[id] = e
		}
	}
	md := e.md
	switch {
	case e.pending != noPending:
		c.mu.Unlock()
		return -1, -1, kerr.ConcurrentTransactions
	case given && !(md.ProducerEpoch == -1 || pid == md.ProducerID || (pid == md.LastProducerID && isEpochExhausted(epoch))):
		c.mu.Unlock()
		return -1, -1, kerr.ProducerFenced
	}
	switch md.State {
	case Empty, CompleteCommit, CompleteAbort:
	case Ongoing:
		// Abort it first with the epoch bumped (fencing the current
		// producer); the client retries and gets the epoch bumped again.
		next := c.fenceLocked(e)
		c.mu.Unlock()
		if ke := c.commit(e, next); ke != nil {
			return -1, -1, ke
		}
		c.completeAsync(e, next)
		return -1, -1, kerr.ConcurrentTransactions
	default: // PrepareCommit, PrepareAbort
		c.mu.Unlock()
		return -1, -1, kerr.ConcurrentTransactions
	}
	next := md.clone()
	if isEpochExhausted(md.ProducerEpoch) && (!given || epoch == md.ProducerEpoch) {
		e.pending = Empty // the id is drawn without the lock
		c.mu.Unlock()
		newID, err := c.cfg.NewProducerID()
		c.mu.Lock()
		if err != nil {
			e.pending = noPending
			c.mu.Unlock()
			c.cfg.Logger.Error("txn: no producer id available", "err", err)
			return -1, -1, kerr.CoordinatorLoadInProgress
		}
		next.ProducerID, next.ProducerEpoch, next.LastProducerID, next.LastProducerEpoch = newID, 0, -1, -1
		if given {
			next.LastProducerID, next.LastProducerEpoch = md.ProducerID, md.ProducerEpoch
		}
	} else {
		switch {
		case !given:
			next.ProducerEpoch, next.LastProducerEpoch = md.ProducerEpoch+1, -1
		case md.ProducerEpoch == -1 || epoch == md.ProducerEpoch:
			next.ProducerEpoch, next.LastProducerEpoch = md.ProducerEpoch+1, md.ProducerEpoch
		case epoch == md.LastProducerEpoch:
			// A retry of a bump whose answer was lost: same epoch.
		default:
			c.mu.Unlock()
			return -1, -1, kerr.ProducerFenced
		}
	}
	next.State, next.TimeoutMs, next.Partitions, next.StartMs, next.LastUpdateMs = Empty, timeoutMs, map[TopicPartition]struct{}{}, -1, c.nowMs()
	next.NextProducerID, next.ClientVersion = -1, TransactionVersion0
	e.pending = Empty
	c.mu.Unlock()
	if ke := c.commit(e, next); ke != nil {
		return -1, -1, ke
	}
	return next.ProducerID, next.ProducerEpoch, nil
}

// fenceLocked prepares the abort of e's ongoing transaction with the
// producer epoch bumped (Kafka's prepareFenceProducerEpoch followed by
// PrepareAbort), so that the producer that began it is fenced.
func (c *Coordinator) fenceLocked(e *entry) Metadata {
	next := e.md.clone()
	if next.ProducerEpoch < math.MaxInt16 {
		next.ProducerEpoch++
	}
	next.LastProducerEpoch = -1
	next.State, next.LastUpdateMs = PrepareAbort, c.nowMs()
	// A fence is no EndTxn of version 2: the fenced producer's EndTxn
	// retry with the epoch before the bump must be PRODUCER_FENCED, not
	// taken for a retry. (Its markers' epoch is above the records'
	// anyway.)
	next.ClientVersion = min(next.ClientVersion, TransactionVersion1)
	e.pending = PrepareAbort
	return next
}

// AddPartitions adds partitions to the producer's transaction
// (AddPartitionsToTxn and AddOffsetsToTxn; Kafka's handleAddPartitionsToTransaction),
// beginning it if none is ongoing. The error applies to every partition:
// INVALID_REQUEST, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
// CONCURRENT_TRANSACTIONS while a transaction ends, and lookupLocked's.
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, tps []TopicPartition) *kerr.Error {
	return c.addPartitions(id, pid, epoch, tps, false)
}

// AddPartitionsV2 is AddPartitions for a transaction of transaction
// version 2 (KIP-890 part 2): a partition leader adds the partition of a
// Produce v12+, a group coordinator the offsets partition of a
// TxnOffsetCommit v5+, where a client of transaction version 1 sends
// AddPartitionsToTxn or AddOffsetsToTxn. A transaction it begins is of
// version 2. While a transaction whose epoch overflowed completes, its
// next producer id gets CONCURRENT_TRANSACTIONS rather than
// INVALID_PRODUCER_ID_MAPPING.
func (c *Coordinator) AddPartitionsV2(id string, pid int64, epoch int16, tps []TopicPartition) *kerr.Error {
	return c.addPartitions(id, pid, epoch, tps, true)
}

func (c *Coordinator) addPartitions(id string, pid int64, epoch int16, tps []TopicPartition, tv2 bool) *kerr.Error {
	if id == "" {
		return kerr.InvalidRequest
	}
	c.mu.Lock()
	_, e, ke := c.lookupLocked(id)
	for tv2 && ke == nil && e != nil && e.pending == Ongoing {
		// Another partition leader's add of this transaction is being
		// written (under version 2 each leader adds its own partition,
		// at once): wait for it rather than answer
		// CONCURRENT_TRANSACTIONS. The write is bounded by the log's
		// append.
		c.mu.added.Wait()
		_, e, ke = c.lookupLocked(id)
	}
	switch {
	case ke != nil:
	case e != nil && e.md.hasNextProducerID() && e.md.NextProducerID == pid:
		ke = kerr.ConcurrentTransactions // the overflowed transaction is completing
	case e == nil || e.md.ProducerID != pid:
		ke = kerr.InvalidProducerIDMapping
	case e.md.ProducerEpoch != epoch:
		ke = kerr.ProducerFenced
	case e.pending != noPending || e.md.State == PrepareCommit || e.md.State == PrepareAbort:
		ke = kerr.ConcurrentTransactions
	case e.md.State != Ongoing && !e.md.State.ended():
		ke = kerr.InvalidTxnState
	}
	if ke != nil {
		c.mu.Unlock()
		return ke
	}
	next := e.md.clone()
	added := false
	for _, tp := range tps {
		if _, ok := next.Partitions[tp]; !ok {
			next.Partitions[tp] = struct{}{}
			added = true
		}
	}
	if e.md.State == Ongoing && !added {
		c.mu.Unlock()
		return nil // all there already
	}
	if e.md.State.ended() {
		next.StartMs = c.nowMs()
		next.ClientVersion = TransactionVersion1
		if tv2 {
			next.ClientVersion = TransactionVersion2
		}
	}
	next.State, next.LastUpdateMs = Ongoing, c.nowMs()
	e.pending = Ongoing
	c.mu.Unlock()
	return c.commit(e, next)
}

// VerifyPartitions answers AddPartitionsToTxn v4+ VerifyOnly (KIP-890):
// for each partition, nil when it is part of the producer's ongoing
// transaction, else TRANSACTION_ABORTABLE (as Kafka 3.9; the partition
// leader answers its producer INVALID_TXN_STATE); or one error for all:
// INVALID_REQUEST, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
// CONCURRENT_TRANSACTIONS, and lookupLocked's. Nothing is added.
func (c *Coordinator) VerifyPartitions(id string, pid int64, epoch int16, tps []TopicPartition) (map[TopicPartition]*kerr.Error, *kerr.Error) {
	if id == "" {
		return nil, kerr.InvalidRequest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, e, ke := c.lookupLocked(id)
	switch {
	case ke != nil:
		return nil, ke
	case e != nil && e.md.hasNextProducerID() && e.md.NextProducerID == pid:
		return nil, kerr.ConcurrentTransactions
	case e == nil || e.md.ProducerID != pid:
		return nil, kerr.InvalidProducerIDMapping
	case e.md.ProducerEpoch != epoch:
		return nil, kerr.ProducerFenced
	case e.md.State == PrepareCommit || e.md.State == PrepareAbort:
		return nil, kerr.ConcurrentTransactions
	}
	out := make(map[TopicPartition]*kerr.Error, len(tps))
	for _, tp := range tps {
		_, in := e.md.Partitions[tp]
		if in && e.md.State == Ongoing {
			out[tp] = nil
		} else {
			out[tp] = kerr.TransactionAbortable
		}
	}
	return out, nil
}

// EndTxn commits or aborts the producer's transaction (Kafka's
// handleEndTransaction from a client of transaction version 1):
// PrepareCommit or PrepareAbort is written, EndTxn returns, and the
// markers go out in the background, after which CompleteCommit or
// CompleteAbort is written. A retry of the decision already taken answers
// nil (completed) or CONCURRENT_TRANSACTIONS (markers still going out);
// the other decision, or no transaction, is INVALID_TXN_STATE. Also
// INVALID_REQUEST, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED and
// lookupLocked's.
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit bool) *kerr.Error {
	_, _, ke := c.endTxn(id, pid, epoch, commit, false)
	return ke
}

// EndTxnV2 is EndTxn for a client of transaction version 2 (EndTxn v5+
// while transaction.version 2 is finalized; KIP-890 part 2): every commit
// and abort bumps the producer epoch, and EndTxnV2 returns the producer
// id and epoch of the producer's next transaction. When the epoch would
// reach its limit the transaction ends at the last epoch and a new
// producer id with epoch 0 takes over. The markers carry the bumped
// epoch, so a late write of the ended transaction's epoch is refused by
// the partition. A retry with the epoch before the bump answers as
// EndTxn's retry does (nil with the current id and epoch, or
// CONCURRENT_TRANSACTIONS); an abort with no transaction ongoing is
// legal and bumps the epoch too.
func (c *Coordinator) EndTxnV2(id string, pid int64, epoch int16, commit bool) (int64, int16, *kerr.Error) {
	return c.endTxn(id, pid, epoch, commit, true)
}

func (c *Coordinator) endTxn(id string, pid int64, epoch int16, commit, tv2 bool) (int64, int16, *kerr.Error) {
	if id == "" {
		return -1, -1, kerr.InvalidRequest
	}
	c.mu.Lock()
	_, e, ke := c.lookupLocked(id)
	if ke == nil && e == nil {
		ke = kerr.InvalidProducerIDMapping
	}
	if ke != nil {
		c.mu.Unlock()
		return -1, -1, ke
	}
	md := e.md
	bumped := md.ClientVersion >= TransactionVersion2 // md's epoch was bumped by its EndTxn
	// A retry of a version 2 EndTxn whose answer was lost: the epoch is
	// one behind, or the epoch overflowed into a new producer id.
	retryBump := bumped && md.ProducerID == pid && md.ProducerEpoch == epoch+1
	retryOverflow := bumped && md.LastProducerID == pid && epoch == epochExhausted && md.ProducerEpoch == 0 &&
		(md.State == CompleteCommit || md.State == CompleteAbort)
	emptyAbort := tv2 && !commit && md.State.ended() && md.ProducerID == pid && md.ProducerEpoch == epoch
	var validEpoch bool
	switch md.State {
	case PrepareCommit, PrepareAbort:
		validEpoch = retryBump || (!bumped && epoch == md.ProducerEpoch)
	case CompleteCommit, CompleteAbort:
		validEpoch = retryBump || retryOverflow || (!bumped && epoch == md.ProducerEpoch) || emptyAbort
	default:
		validEpoch = epoch == md.ProducerEpoch
	}
	switch {
	case md.ProducerID != pid && !retryOverflow:
		ke = kerr.InvalidProducerIDMapping
	case !validEpoch:
		ke = kerr.ProducerFenced
	case e.pending != noPending:
		ke = kerr.ConcurrentTransactions
	}
	if ke != nil {
		c.mu.Unlock()
		return -1, -1, ke
	}
	switch st := md.State; {
	case st == Ongoing, emptyAbort:
	case st == CompleteCommit && commit, st == CompleteAbort && !commit:
		c.mu.Unlock()
		return md.ProducerID, md.ProducerEpoch, nil
	case st == PrepareCommit && commit, st == PrepareAbort && !commit:
		c.mu.Unlock()
		return -1, -1, kerr.ConcurrentTransactions
	default:
		c.mu.Unlock()
		c.cfg.Logger.Debug("txn: EndTxn in an invalid state", "transactional_id", id, "state", st, "commit", commit)
		return -1, -1, kerr.InvalidTxnState
	}
	next := md.clone()
	next.State, next.LastUpdateMs = PrepareAbort, c.nowMs()
	if commit {
		next.State = PrepareCommit
	}
	if emptyAbort {
		// Nothing to mark: PrepareAbort then CompleteAbort, with the
		// epoch bumped.
		next.Partitions, next.StartMs = map[TopicPartition]struct{}{}, c.nowMs()
	}
	e.pending = next.State
	if tv2 {
		next.ClientVersion = TransactionVersion2
		next.ProducerEpoch, next.LastProducerEpoch = md.ProducerEpoch+1, md.ProducerEpoch
		if isEpochExhausted(md.ProducerEpoch) {
			c.mu.Unlock()
			newID, err := c.cfg.NewProducerID()
			if err != nil {
				c.mu.Lock()
				e.pending = noPending
				c.mu.Unlock()
				c.cfg.Logger.Error("txn: no producer id available", "err", err)
				return -1, -1, kerr.CoordinatorLoadInProgress
			}
			c.mu.Lock()
			next.NextProducerID = newID
		}
	}
	c.mu.Unlock()
	if ke := c.commit(e, next); ke != nil {
		return -1, -1, ke
	}
	done := c.completeAsync(e, next)
	if c.cfg.EndWait > 0 {
		t := time.NewTimer(c.cfg.EndWait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
	}
	if next.hasNextProducerID() {
		return next.NextProducerID, 0, nil
	}
	return next.ProducerID, next.ProducerEpoch, nil
}

// Describe returns the state of a transactional id (DescribeTransactions):
// TRANSACTIONAL_ID_NOT_FOUND for an unknown id, and lookupLocked's errors.
func (c *Coordinator) Describe(id string) (Metadata, *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, e, ke := c.lookupLocked(id)
	switch {
	case ke != nil:
		return Metadata{}, ke
	case e == nil:
		return Metadata{}, kerr.TransactionalIDNotFound
	}
	return e.md.clone(), nil
}

// ListFilter selects transactions for List; zero values select all.
type ListFilter struct {
	States      []State
	ProducerIDs []int64
	// MinDurationMs, when >= 0, keeps only the transactions that began
	// more than that long ago (ListTransactions v1); -1: all.
	MinDurationMs int64
}

// List returns the transactions of the loaded partitions that match f
// (ListTransactions), ordered by transactional id; COORDINATOR_LOAD_IN_PROGRESS
// while a partition loads, COORDINATOR_NOT_AVAILABLE after Close.
func (c *Coordinator) List(f ListFilter) ([]Metadata, *kerr.Error) {
	now := c.nowMs()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, kerr.CoordinatorNotAvailable
	}
	for _, p := range c.mu.partitions {
		if p.loading {
			return nil, kerr.CoordinatorLoadInProgress
		}
	}
	var out []Metadata
	for _, e := range c.mu.txns {
		md := e.md
		switch {
		case md.State == Dead:
			continue
		case len(f.ProducerIDs) > 0 && !containsInt64(f.ProducerIDs, md.ProducerID):
			continue
		case len(f.States) > 0 && !containsState(f.States, md.State):
			continue
		case f.MinDurationMs >= 0 && now-md.StartMs <= f.MinDurationMs:
			continue
		}
		out = append(out, md.clone())
	}
	sortByID(out)
	return out, nil
}

func containsInt64(xs []int64, x int64) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func containsState(xs []State, x State) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Unload gives up a partition (its leadership moved away): its
// transactions are dropped from memory and its marker senders stop; the
// new coordinator carries on from what the log holds. Unloading a
// partition that is not loaded does nothing.
func (c *Coordinator) Unload(partitionID int) {
	c.mu.Lock()
	p := c.mu.partitions[partitionID]
	if p == nil || p.loading {
		c.mu.Unlock()
		return
	}
	delete(c.mu.partitions, partitionID)
	for id, e := range c.mu.txns {
		if e.p == p {
			delete(c.mu.txns, id)
		}
	}
	c.mu.Unlock()
	p.cancel()
}

// Close stops the coordinator: later requests get COORDINATOR_NOT_AVAILABLE;
// marker senders and the timers stop. Close returns once they have. It
// closedNow reports whether Close has run.
func (c *Coordinator) closedNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.closed
}

// does not close the logs.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	ps := c.mu.partitions
	c.mu.partitions = map[int]*partition{}
	c.mu.txns = map[string]*entry{}
	c.mu.Unlock()
	for _, p := range ps {
		p.cancel()
	}
	close(c.stop)
	c.wg.Wait()
	return nil
}
