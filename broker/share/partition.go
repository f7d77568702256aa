package share

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// RecordState is the state of one in-flight record of a share partition,
// with the numbers Kafka persists (DeliveryState of the share coordinator's
// state batches). Never change them.
type RecordState int8

const (
	Available    RecordState = 0
	Acquired     RecordState = 1
	Acknowledged RecordState = 2
	// Archiving is KIP-1191's state of a record on its way to the
	// group's dead-letter topic: rejected or at the delivery limit, not
	// delivered again, and not finished until its dead-letter copy is
	// written (then Archived). It is persisted as such, so a new leader
	// writes the copy again.
	Archiving RecordState = 3
	Archived  RecordState = 4
)

// Acknowledgement types of ShareFetch and ShareAcknowledge (KIP-932,
// KIP-1222's RENEW). Never change them.
const (
	AckGap     int8 = 0
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4
)

// record is one in-flight record.
type record struct {
	state      RecordState
	deliveries int16
	owner      string    // the member holding it, while Acquired
	lockUntil  time.Time // when its acquisition lock expires, while Acquired
	rejected   bool      // Archiving because a member rejected it
}

// Batch is one record batch the broker read from the log, as Acquire needs
// it: its offsets, and whether its records are archived unseen instead of
// delivered (a control batch of transaction markers, or an aborted
// transaction's batch under read_committed).
type Batch struct {
	Base, Last int64
	Archive    bool
}

// AcquiredRange is a run of acquired offsets with one delivery count.
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
}

// AckBatch is one acknowledgement batch: the offsets First..Last and
// either one type for all of them or one per offset.
type AckBatch struct {
	First, Last int64
	Types       []int8
}

// Limits are the limits an acquisition or acknowledgement runs under.
type Limits struct {
	// Lock is the acquisition lock duration.
	Lock time.Duration
	// DeliveryCountLimit archives a record delivered this often instead
	// of making it available again.
	DeliveryCountLimit int16
	// MaxRecordLocks bounds the in-flight window (end - start).
	MaxRecordLocks int
	// DeadLetter says the group has a dead-letter topic: a rejected
	// record, or one at the delivery limit, becomes Archiving instead of
	// Archived, until its copy is written.
	DeadLetter bool
}

// Partition is one share partition: the state of one share group on one
// topic partition, kept by the partition's leader. Offsets below start
// are done (acknowledged or archived); [start, end) is the in-flight
// window, every offset of which has a record; offsets from end on were
// never acquired and are available.
type Partition struct {
	mu struct {
		sync.Mutex
		loaded     bool
		start, end int64
		inflight   map[int64]*record
		stateEpoch int32
		// changed is closed and replaced when records become available
		// again (released, expired) or the window moves, to wake
		// delayed share fetches.
		changed chan struct{}
		// totals counts what happened to records since the share
		// partition was loaded here.
		totals Totals
		// stale says the share coordinator's state may have changed
		// behind this copy (MarkStale): the next use reads it again,
		// unless records are acquired by then.
		stale bool
		// unsaved says a change no request waited for (a release, a
		// lock expiry, an archive at the delivery limit) failed to be
		// written: the share coordinator's state is behind this copy
		// until a write succeeds. The sweeper writes it again from
		// retryAt on (Manager.Sweep), so a window finished here is
		// finished in the share coordinator too.
		unsaved bool
		retryAt time.Time
	}
	leaderEpoch int32
}

// Totals count records acquired, acquired again (redelivered) and
// archived (rejected or at the delivery limit) by a share partition.
type Totals struct {
	Acquired, Redelivered, Archived int64
}

// Totals returns the share partition's totals.
func (p *Partition) Totals() Totals {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.totals
}

// newPartition returns an unloaded partition for a leader epoch.
func newPartition(leaderEpoch int32) *Partition {
	p := &Partition{leaderEpoch: leaderEpoch}
	p.mu.inflight = map[int64]*record{}
	p.mu.changed = make(chan struct{})
	return p
}

// NewPartition returns a share partition starting at start with nothing
// in flight, for tests and tools.
func NewPartition(start int64) *Partition {
	p := newPartition(0)
	p.mu.loaded = true
	p.mu.start, p.mu.end = start, start
	return p
}

// Offsets returns the share-partition start offset and the end of the
// in-flight window.
func (p *Partition) Offsets() (start, end int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.start, p.mu.end
}

// Changed returns a channel closed when records become available again
// or the window moves.
func (p *Partition) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.changed
}

// wakeLocked closes the changed channel.
func (p *Partition) wakeLocked() {
	close(p.mu.changed)
	p.mu.changed = make(chan struct{})
}

// Counts are the numbers of in-flight records by state.
type Counts struct {
	Available, Acquired, Acknowledged, Archiving, Archived int
}

// Counts returns the in-flight records by state.
func (p *Partition) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.countsLocked()
}

func (p *Partition) countsLocked() Counts {
	var c Counts
	for _, r := range p.mu.inflight {
		switch r.state {
		case Available:
			c.Available++
		case Acquired:
			c.Acquired++
		case Acknowledged:
			c.Acknowledged++
		case Archiving:
			c.Archiving++
		case Archived:
			c.Archived++
		}
	}
	return c
}

// FetchOffset returns where the next acquisition reads the log from: the
// first available in-flight record, else the window's end. Expired locks
// are released first. ok is false when nothing can be acquired: no
// in-flight record is available and the window is full.
func (p *Partition) FetchOffset(now time.Time, l Limits) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(now, l)
	for o := p.mu.start; o < p.mu.end; o++ {
		if p.mu.inflight[o].state == Available {
			return o, true
		}
	}
	return p.mu.end, p.mu.end-p.mu.start < int64(l.MaxRecordLocks)
}

// Acquire acquires for member the available records of batches (read
// from the log at FetchOffset, in offset order), at most maxRecords of
// them; unless strict, a batch begun past the window's old end is
// acquired whole (Kafka's batch-optimized mode). Offsets of Archive
// batches and the gaps between batches (compacted away) are archived as
// they are passed. A record already delivered DeliveryCountLimit times is
// archived instead. It returns the acquired ranges.
func (p *Partition) Acquire(member string, batches []Batch, maxRecords int, strict bool, now time.Time, l Limits) []AcquiredRange {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []AcquiredRange
	n := 0
	take := func(o int64, r *record) {
		r.state, r.owner, r.lockUntil = Acquired, member, now.Add(l.Lock)
		r.deliveries++
		n++
		p.mu.totals.Acquired++
		if r.deliveries > 1 {
			p.mu.totals.Redelivered++
		}
		if k := len(out); k > 0 && out[k-1].Last == o-1 && out[k-1].DeliveryCount == r.deliveries {
			out[k-1].Last = o
			return
		}
		out = append(out, AcquiredRange{First: o, Last: o, DeliveryCount: r.deliveries})
	}
batches:
	for _, b := range batches {
		for o := max(b.Base, p.mu.start); o <= b.Last; o++ {
			if o < p.mu.end {
				if n >= maxRecords {
					break batches
				}
				r := p.mu.inflight[o]
				if r.state != Available {
					continue
				}
				if r.deliveries >= l.DeliveryCountLimit {
					p.archiveLocked(r, false, l)
					continue
				}
				take(o, r)
				continue
			}
			if n >= maxRecords && (strict || o == b.Base) || !p.extendLocked(o, l) {
				break batches
			}
			r := &record{}
			p.mu.inflight[o] = r
			p.mu.end = o + 1
			if b.Archive {
				r.state = Archived
				continue
			}
			take(o, r)
		}
	}
	p.advanceLocked()
	return out
}

// extendLocked makes room for offset o, at or past the window's end: the
// gap before it (offsets no batch holds) is archived, or skipped when
// nothing is in flight. False when the window is full or the gap too long
// to keep.
func (p *Partition) extendLocked(o int64, l Limits) bool {
	if p.mu.start == p.mu.end {
		p.mu.start, p.mu.end = o, o
	}
	if o-p.mu.start >= int64(l.MaxRecordLocks) {
		return false
	}
	for g := p.mu.end; g < o; g++ {
		p.mu.inflight[g] = &record{state: Archived}
	}
	p.mu.end = o
	return true
}

// advanceLocked moves the start offset over the finished records at the
// front of the window.
func (p *Partition) advanceLocked() {
	moved := false
	for p.mu.start < p.mu.end {
		r := p.mu.inflight[p.mu.start]
		if r.state != Acknowledged && r.state != Archived {
			break
		}
		delete(p.mu.inflight, p.mu.start)
		p.mu.start++
		moved = true
	}
	if moved {
		p.wakeLocked()
	}
}

// releaseLocked makes an acquired record available again, or archives it
// at the delivery limit. It reports whether it became available.
func (p *Partition) releaseLocked(r *record, l Limits) bool {
	r.owner, r.lockUntil = "", time.Time{}
	if r.deliveries >= l.DeliveryCountLimit {
		p.archiveLocked(r, false, l)
		return false
	}
	r.state = Available
	return true
}

// archiveLocked archives a record that was rejected or reached the
// delivery limit: Archiving when the group has a dead-letter topic,
// else Archived.
func (p *Partition) archiveLocked(r *record, rejected bool, l Limits) {
	r.owner, r.lockUntil = "", time.Time{}
	r.state, r.rejected = Archived, false
	if l.DeadLetter {
		r.state, r.rejected = Archiving, rejected
	}
	p.mu.totals.Archived++
}

// releaseWhereLocked releases the acquired records which selects and
// reports whether there were any.
func (p *Partition) releaseWhereLocked(which func(r *record) bool, l Limits) bool {
	any := false
	for _, r := range p.mu.inflight {
		if r.state == Acquired && which(r) {
			p.releaseLocked(r, l)
			any = true
		}
	}
	if any {
		p.advanceLocked()
		p.wakeLocked()
	}
	return any
}

// expireLocked releases the records whose lock expired by now.
func (p *Partition) expireLocked(now time.Time, l Limits) bool {
	return p.releaseWhereLocked(func(r *record) bool { return !now.Before(r.lockUntil) }, l)
}

// Expire releases the records whose acquisition lock expired by now
// (archiving those at the delivery limit) and reports whether any did.
func (p *Partition) Expire(now time.Time, l Limits) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expireLocked(now, l)
}

// ReleaseMember releases every record member holds, as when its session
// closes or it leaves the group, and reports whether it held any.
func (p *Partition) ReleaseMember(member string, l Limits) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.releaseWhereLocked(func(r *record) bool { return r.owner == member }, l)
}

// ValidateAckBatches checks the shape of a partition's acknowledgement
// batches: each First <= Last, in increasing order without overlap, one
// type or one per offset, each type at most maxType. INVALID_REQUEST
// otherwise.
func ValidateAckBatches(batches []AckBatch, maxType int8) int16 {
	prev := int64(-1)
	for i, b := range batches {
		if b.First < 0 || b.First > b.Last || i > 0 && b.First <= prev || len(b.Types) == 0 ||
			len(b.Types) > 1 && int64(len(b.Types)) != b.Last-b.First+1 {
			return kerr.InvalidRequest.Code
		}
		for _, t := range b.Types {
			if t < AckGap || t > maxType {
				return kerr.InvalidRequest.Code
			}
		}
		prev = b.Last
	}
	return 0
}

// ackType is the type batch b gives offset o.
func (b AckBatch) ackType(o int64) int8 {
	if len(b.Types) == 1 {
		return b.Types[0]
	}
	return b.Types[o-b.First]
}

// Acknowledge applies member's acknowledgements (shaped as
// ValidateAckBatches checks): every offset must be in flight and
// acquired by member, else nothing changes and the answer is
// INVALID_RECORD_STATE. ACCEPT acknowledges, RELEASE makes available (or
// archives at the delivery limit), REJECT archives (Archiving with a
// dead-letter topic), GAP archives, RENEW extends the lock by l.Lock
// from now. undo restores the state before, for an acknowledgement that
// could not be persisted; it must be called, if at all, before any other
// change.
func (p *Partition) Acknowledge(member string, batches []AckBatch, now time.Time, l Limits) (undo func(), code int16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	saved, code := p.acknowledgeLocked(member, batches, now, l)
	if code != 0 {
		return func() {}, code
	}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.restoreLocked(saved)
	}, 0
}

// acknowledgeLocked is Acknowledge with the lock held; it returns the
// state before, for restoreLocked.
func (p *Partition) acknowledgeLocked(member string, batches []AckBatch, now time.Time, l Limits) (snapshot, int16) {
	for _, b := range batches {
		for o := b.First; o <= b.Last; o++ {
			r := p.mu.inflight[o]
			if o < p.mu.start || o >= p.mu.end || r.state != Acquired || r.owner != member {
				return snapshot{}, kerr.InvalidRecordState.Code
			}
		}
	}
	saved := p.snapshotLocked()
	released := false
	for _, b := range batches {
		for o := b.First; o <= b.Last; o++ {
			r := p.mu.inflight[o]
			switch b.ackType(o) {
			case AckAccept:
				r.state, r.owner = Acknowledged, ""
			case AckRelease:
				released = p.releaseLocked(r, l) || released
			case AckReject:
				p.archiveLocked(r, true, l)
			case AckGap:
				r.state, r.owner = Archived, ""
			case AckRenew:
				r.lockUntil = now.Add(l.Lock)
			}
		}
	}
	p.advanceLocked()
	if released {
		p.wakeLocked()
	}
	return saved, 0
}

// snapshot is a copy of a partition's window.
type snapshot struct {
	start, end int64
	inflight   map[int64]record
	totals     Totals
}

// snapshotLocked copies the window (at most MaxRecordLocks records).
func (p *Partition) snapshotLocked() snapshot {
	s := snapshot{start: p.mu.start, end: p.mu.end, inflight: make(map[int64]record, len(p.mu.inflight)), totals: p.mu.totals}
	for o, r := range p.mu.inflight {
		s.inflight[o] = *r
	}
	return s
}

// restoreLocked puts a snapshot's window back.
func (p *Partition) restoreLocked(s snapshot) {
	p.mu.start, p.mu.end, p.mu.totals = s.start, s.end, s.totals
	p.mu.inflight = make(map[int64]*record, len(s.inflight))
	for o, r := range s.inflight {
		p.mu.inflight[o] = &r
	}
}

// SkipTo moves the start offset up to off (the log start passed it:
// retention or DeleteRecords removed the records), dropping what was in
// flight below it, as Kafka's share partitions do.
func (p *Partition) SkipTo(off int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if off <= p.mu.start {
		return
	}
	for o := p.mu.start; o < min(off, p.mu.end); o++ {
		delete(p.mu.inflight, o)
	}
	p.mu.start = off
	p.mu.end = max(p.mu.end, off)
	p.wakeLocked()
}
