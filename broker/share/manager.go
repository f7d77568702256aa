package share

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Manager holds one broker's share groups: the membership of the groups
// it coordinates (Groups), the share partitions of the partitions it
// leads, and the share sessions its clients opened.
//
// Lock order: Manager.mu, then a Partition's mu; Groups and Sessions
// have locks of their own, never held while another of this package is
// taken (doc.go).
type Manager struct {
	cfg      Config
	Groups   *Groups
	Sessions *Sessions
	mu       struct {
		sync.Mutex
		parts map[Key]*Partition
	}
	stop chan struct{}
	done chan struct{}
	// The dead-letter loop (dead_letter.go): kicked when records become
	// Archiving, stopped by dlqStop.
	dlqKick chan struct{}
	dlqStop context.CancelFunc
	dlqDone chan struct{}
	closing sync.Once
}

// sweepInterval is how often expired acquisition locks and member
// sessions are looked for.
const sweepInterval = 100 * time.Millisecond

// New returns a Manager and starts its sweeper; Close stops it.
func New(cfg Config) (*Manager, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}), dlqKick: make(chan struct{}, 1), dlqDone: make(chan struct{})}
	m.mu.parts = map[Key]*Partition{}
	m.Groups = newGroups(cfg)
	m.Sessions = newSessions(cfg.MaxSessions)
	var dlqCtx context.Context
	dlqCtx, m.dlqStop = context.WithCancel(context.Background())
	go m.sweepLoop()
	go m.deadLetterLoop(dlqCtx)
	return m, nil
}

// Close stops the sweeper and the dead-letter loop; later calls do
// nothing.
func (m *Manager) Close() {
	m.closing.Do(func() {
		close(m.stop)
		m.dlqStop()
		<-m.done
		<-m.dlqDone
	})
}

// GroupConfig returns a group's configs.
func (m *Manager) GroupConfig(group string) GroupConfig { return m.cfg.GroupConfig(group) }

// Limits returns the limits a group's share partitions run under.
func (m *Manager) Limits(group string) Limits {
	return Limits{
		Lock:               m.cfg.GroupConfig(group).RecordLockDuration,
		DeliveryCountLimit: int16(m.cfg.DeliveryCountLimit),
		MaxRecordLocks:     m.cfg.PartitionMaxRecordLocks,
		DeadLetter:         m.cfg.GroupConfig(group).DeadLetterTopic != "",
	}
}

// Now returns the manager's clock's time.
func (m *Manager) Now() time.Time { return m.cfg.Now() }

// Partition returns the share partition k at leader epoch epoch, read
// from the Persister on first use (initialized at startAt when the share
// coordinator has no state for it). A share partition of an older
// leader epoch is dropped and read again: another leader may have
// changed the state since; a request at an older epoch than the one
// loaded is NOT_LEADER_OR_FOLLOWER.
func (m *Manager) Partition(ctx context.Context, k Key, epoch int32, startAt func(GroupConfig) (int64, error)) (*Partition, error) {
	m.mu.Lock()
	p := m.mu.parts[k]
	if p != nil && epoch < p.leaderEpoch {
		m.mu.Unlock()
		return nil, &persistError{code: kerr.NotLeaderForPartition.Code, msg: "stale leader epoch"}
	}
	if p == nil || p.leaderEpoch != epoch {
		p = newPartition(epoch)
		m.mu.parts[k] = p
	}
	m.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.loaded && (!p.mu.stale || p.countsLocked().Acquired > 0) {
		return p, nil
	}
	p.mu.stale = false
	cfg := m.cfg.GroupConfig(k.Group)
	return p, m.loadLocked(ctx, k, p, func() (int64, error) { return startAt(cfg) })
}

// Acknowledge applies member's acknowledgements to share partition k
// and persists the result before returning; if the state cannot be
// persisted, the acknowledgements are undone and the error's code is
// returned. The partition's lock is held from the change through the
// write to the undo, so no acquisition or other acknowledgement comes
// between them (an undo after one would take back what it did: a record
// released here, acquired by another member meanwhile, would go back to
// this member while the other one holds it too).
func (m *Manager) Acknowledge(ctx context.Context, k Key, p *Partition, member string, batches []AckBatch) int16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	saved, code := p.acknowledgeLocked(member, batches, m.cfg.Now(), m.Limits(k.Group))
	if code != 0 {
		return code
	}
	if err := m.writeLocked(ctx, k, p); err != nil {
		m.cfg.Logger.Warn("share: acknowledgement not persisted; undone", "group", k.Group, "partition", k.Partition, "err", err)
		p.restoreLocked(saved)
		m.dropFenced(k, p, err) // takes m.mu: no path takes p.mu under m.mu
		return ErrorCode(err)
	}
	m.kickDeadLetters()
	return 0
}

// ReleaseMember releases the records member holds in the share
// partitions of group on this broker (its session closed, it left, or it
// was fenced), and persists their delivery counts.
func (m *Manager) ReleaseMember(group, member string, only func(Key) bool) {
	for k, p := range m.partitions(func(k Key) bool { return k.Group == group && (only == nil || only(k)) }) {
		if p.ReleaseMember(member, m.Limits(group)) {
			m.persist(k, p)
		}
	}
}

// Drop forgets the share partitions drop selects (leadership moved
// away); a later use reads them from the Persister again.
func (m *Manager) Drop(drop func(Key) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.mu.parts {
		if drop(k) {
			delete(m.mu.parts, k)
		}
	}
}

// MarkStale marks the loaded share partitions of group to be read from
// the Persister again on their next use (keeping their totals): no member
// of the group has a share session on this broker any more, and while the
// group has no members its state may be changed by the offsets admin
// APIs (Kafka's ShareGroupListener.onGroupEmpty). A share partition with
// records acquired by then is not read again.
func (m *Manager) MarkStale(group string) {
	for _, p := range m.partitions(func(k Key) bool { return k.Group == group }) {
		p.mu.Lock()
		p.mu.stale = true
		p.mu.Unlock()
	}
}

// PartitionStats are a share partition's in-flight records by state and
// its totals.
type PartitionStats struct {
	Counts Counts
	Totals Totals
}

// Stats returns the stats of the loaded share partitions.
func (m *Manager) Stats() map[Key]PartitionStats {
	out := map[Key]PartitionStats{}
	for k, p := range m.partitions(func(Key) bool { return true }) {
		out[k] = PartitionStats{Counts: p.Counts(), Totals: p.Totals()}
	}
	return out
}

// PartitionState is what a loaded share partition holds in memory: its
// start offset, the end of its in-flight window, its in-flight records
// by state and its totals.
type PartitionState struct {
	Start, End int64
	Counts     Counts
	Totals     Totals
}

// Describe returns the in-memory state of the share partitions of group
// that only selects (nil: all) on this broker, by key. A share partition
// that is not loaded, or is marked to be read again on its next use
// (MarkStale) and holds no acquired records, is left out: the share
// coordinator's state may differ from what this copy says.
func (m *Manager) Describe(group string, only func(Key) bool) map[Key]PartitionState {
	out := map[Key]PartitionState{}
	for k, p := range m.partitions(func(k Key) bool { return k.Group == group && (only == nil || only(k)) }) {
		p.mu.Lock()
		c := p.countsLocked()
		if p.mu.loaded && (!p.mu.stale || c.Acquired > 0) {
			out[k] = PartitionState{Start: p.mu.start, End: p.mu.end, Counts: c, Totals: p.mu.totals}
		}
		p.mu.Unlock()
	}
	return out
}

// partitions returns the loaded share partitions keep selects.
func (m *Manager) partitions(keep func(Key) bool) map[Key]*Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[Key]*Partition{}
	for k, p := range m.mu.parts {
		if keep(k) {
			out[k] = p
		}
	}
	return out
}

// persistRetry is how long after a failed write of a change no request
// waited for the sweeper writes the share partition again.
const persistRetry = time.Second

// persist writes a share partition's state after a change no request
// waits for (a lock expiry, a release). The acknowledged state was
// persisted before its answer; a failed write here is logged and the
// partition marked unsaved, and the sweeper writes it again until one
// succeeds (a later acknowledgement's write carries it too). Until then
// a new leader reading the share coordinator's state may deliver a
// record once more, never lose an acknowledgement; without the retry a
// window finished at the front by an expiry (records archived at the
// delivery limit) would stay unfinished in the share coordinator.
func (m *Manager) persist(k Key, p *Partition) {
	p.mu.Lock()
	if !p.mu.loaded {
		p.mu.Unlock()
		return
	}
	err := m.writeLocked(context.Background(), k, p)
	if err != nil {
		if !p.mu.unsaved {
			m.cfg.Logger.Warn("share: state not persisted; the sweeper writes it again", "group", k.Group, "partition", k.Partition, "err", err)
		}
		p.mu.unsaved, p.mu.retryAt = true, m.cfg.Now().Add(persistRetry)
	}
	p.mu.Unlock()
	if err != nil {
		m.dropFenced(k, p, err)
	}
}

// retryDue reports whether p holds a change whose write failed and is
// due to be written again by now.
func (p *Partition) retryDue(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.loaded && p.mu.unsaved && !now.Before(p.mu.retryAt)
}

// dropFenced forgets share partition p of k when the share coordinator
// fenced its write (FENCED_STATE_EPOCH: an admin call initialized the
// state again; FENCED_LEADER_EPOCH: a newer leader read it), so that its
// next use reads the state again, as Kafka's SharePartitionManager
// removes a fenced share partition from its cache.
func (m *Manager) dropFenced(k Key, p *Partition, err error) {
	if c := ErrorCode(err); c != kerr.FencedStateEpoch.Code && c != kerr.FencedLeaderEpoch.Code {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.parts[k] == p {
		delete(m.mu.parts, k)
	}
}

// sweepLoop expires acquisition locks and member sessions.
func (m *Manager) sweepLoop() {
	defer close(m.done)
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.Sweep()
		}
	}
}

// Sweep expires the acquisition locks and member sessions that are due
// by the manager's clock, and writes again the share partitions whose
// last write of such a change failed (persist).
func (m *Manager) Sweep() {
	now := m.cfg.Now()
	for k, p := range m.partitions(func(Key) bool { return true }) {
		if p.Expire(now, m.Limits(k.Group)) || p.retryDue(now) {
			m.persist(k, p)
		}
	}
	for _, g := range m.Groups.expire(now) {
		if m.cfg.MemberGone != nil {
			m.cfg.MemberGone(g.group, g.member)
		}
	}
}
