package group

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

// replayReadBytes is how much Load asks of the log per read.
const replayReadBytes = 1 << 20

// ErrLoad wraps every error of Load.
var ErrLoad = errors.New("group: loading __consumer_offsets failed")

// LoadReport says what Load found in a partition.
type LoadReport struct {
	Partition int
	// Records is how many records were replayed; Skipped how many of them
	// did not decode (unknown versions, malformed keys or values) and were
	// left out, each logged.
	Records, Skipped int
	// Groups is how many groups the partition holds; Offsets how many
	// committed offsets.
	Groups, Offsets int
	// TxnPending is how many transactional offsets wait for their
	// producer's marker (written after the replayed end, or never).
	TxnPending int
	// ShareGroups are the share groups the partition holds, for package
	// share to restore (this package only keeps their records).
	ShareGroups []ShareGroupState
	// Bytes is how much of the log was read; Duration how long the load
	// took. Compaction bounds both: one record per key plus what was
	// appended since the last cleaning.
	Bytes    int64
	Duration time.Duration
}

// Load makes the coordinator own a partition of __consumer_offsets: it
// replays log from its start to its end (last write wins per key; a
// tombstone deletes), rebuilds committed offsets and groups (a group with
// members comes back Stable with its generation, leader, members and
// assignments, and the members' sessions start now), and from then on
// serves the groups that hash to the partition and appends their writes to
// log. During the replay those groups get COORDINATOR_LOAD_IN_PROGRESS.
//
// Load blocks for the replay; the server may load several partitions in
// parallel. On error (the log cannot be read, or holds a corrupt batch)
// the partition stays unowned (NOT_COORDINATOR) and the error wraps
// ErrLoad. Records that do not decode are skipped, logged and counted.
// Load and Unload of one partition must not run concurrently.
func (c *Coordinator) Load(partitionID int, log Log) (LoadReport, error) {
	began := time.Now()
	rep := LoadReport{Partition: partitionID}
	if partitionID < 0 || partitionID >= c.cfg.NumPartitions {
		return rep, fmt.Errorf("%w: partition %d of %d: %w", ErrLoad, partitionID, c.cfg.NumPartitions, ErrBadPartition)
	}
	p := &partition{id: partitionID, loading: true}
	c.mu.Lock()
	switch {
	case c.mu.closed:
		c.mu.Unlock()
		return rep, fmt.Errorf("%w: partition %d: %w", ErrLoad, partitionID, ErrClosed)
	case c.mu.partitions[partitionID] != nil:
		c.mu.Unlock()
		return rep, fmt.Errorf("%w: partition %d: %w", ErrLoad, partitionID, ErrAlreadyLoaded)
	}
	c.mu.partitions[partitionID] = p
	c.mu.Unlock()

	st := newReplay(partitionID, c.cfg.Logger)
	err := st.run(log, c.closedNow)
	rep.Records, rep.Skipped, rep.Bytes = st.records, st.skipped, st.bytes
	if err != nil {
		c.mu.Lock()
		if c.mu.partitions[partitionID] == p {
			delete(c.mu.partitions, partitionID)
		}
		c.mu.Unlock()
		return rep, fmt.Errorf("%w: partition %d: %w", ErrLoad, partitionID, err)
	}

	// The writer goes in first: restored groups may write as soon as
	// their timers run. Close closes it if it comes first (close is
	// idempotent).
	w := newWriter(log, c.cfg.MaxAppendBytes, c.cfg.Logger)
	c.mu.Lock()
	p.w = w
	c.mu.Unlock()
	groups := st.build(c, p)
	for {
		c.mu.Lock()
		if c.mu.closed || c.mu.partitions[partitionID] != p {
			c.mu.Unlock()
			for _, g := range groups {
				g.mu.Lock()
				g.killLocked(kerr.CoordinatorNotAvailable.Code)
				g.mu.Unlock()
			}
			w.close()
			return rep, fmt.Errorf("%w: partition %d: %w", ErrLoad, partitionID, ErrClosed)
		}
		markers := p.markers
		p.markers = nil
		if len(markers) == 0 {
			break // with c.mu held
		}
		c.mu.Unlock()
		// Markers written while the partition loaded: the replay may
		// have read them or not; a second application finds nothing.
		for _, m := range markers {
			for _, g := range groups {
				g.mu.Lock()
				g.completeTxnLocked(m.producerID, m.commit)
				g.mu.Unlock()
			}
		}
	}
	for _, g := range groups {
		c.mu.groups[g.id] = g
		for pid := range g.txnOffsets {
			gs := c.mu.txnProducers[pid]
			if gs == nil {
				gs = make(map[*group]struct{})
				c.mu.txnProducers[pid] = gs
			}
			gs[g] = struct{}{}
		}
	}
	rep.Groups, rep.Offsets, rep.TxnPending = len(groups), st.numOffsets, st.numTxnPending
	rep.ShareGroups = st.shareGroups(c, p)
	p.loading = false
	c.mu.Unlock()
	rep.Duration = time.Since(began)
	c.cfg.Logger.Info("group: loaded partition", "partition", partitionID,
		"records", rep.Records, "bytes", rep.Bytes, "skipped", rep.Skipped, "groups", rep.Groups, "offsets", rep.Offsets, "txn_pending", rep.TxnPending, "share_groups", len(rep.ShareGroups),
		"took", rep.Duration)
	return rep, nil
}

// replay is the state rebuilt from one partition's records.
type replay struct {
	partition     int
	logger        *slog.Logger
	offsets       map[string]map[tp]offsetEntry           // group -> committed offsets
	meta          map[string]*kmsg.GroupMetadataValue     // group -> last metadata (nil: tombstone)
	consumer      map[string]*consumerReplay              // group -> its consumer group records
	share         map[string]*shareReplay                 // group -> its share group records
	shareOrder    []string                                // share groups in order of first appearance
	pending       map[int64]map[string]map[tp]offsetEntry // producer -> group -> transactional offsets before the marker
	order         []string                                // groups in order of first appearance
	seen          map[string]bool
	records       int
	skipped       int
	bytes         int64
	numOffsets    int
	numTxnPending int
}

func newReplay(partition int, logger *slog.Logger) *replay {
	return &replay{
		partition: partition,
		logger:    logger,
		offsets:   make(map[string]map[tp]offsetEntry),
		pending:   make(map[int64]map[string]map[tp]offsetEntry),
		meta:      make(map[string]*kmsg.GroupMetadataValue),
		consumer:  make(map[string]*consumerReplay),
		share:     make(map[string]*shareReplay),
		seen:      make(map[string]bool),
	}
}

// run reads the log from its start offset to its end offset. A compacted
// log has gaps: offsets whose records the cleaner removed, inside batches,
// between batches and between segments (the read skips them), and at the
// tail when the last batches of the last sealed segment were removed and
// the active segment is still empty (the read then returns nothing: no
// batch is left before the end). Before each read it asks closed and
// stops with ErrClosed when the coordinator is: a broker that shuts down
// does not wait for the replay of a partition it will not serve.
func (r *replay) run(log Log, closed func() bool) error {
	off, end := log.LogStartOffset(), log.LogEndOffset()
	for off < end {
		if closed() {
			return ErrClosed
		}
		buf, err := log.ReadCopy(off, replayReadBytes, end)
		if err != nil {
			return fmt.Errorf("read at offset %d: %w", off, err)
		}
		if len(buf) == 0 {
			return nil // a gap up to the log end
		}
		r.bytes += int64(len(buf))
		next := off
		err = segment.SplitBatches(buf, func(h segment.Header, batch []byte) error {
			if h.NextOffset() <= next {
				return nil // wholly before the offset asked for
			}
			var err error
			if h.Control() {
				err = r.control(h, batch)
			} else {
				err = r.batch(h, batch, next)
			}
			if err != nil {
				return err
			}
			next = h.NextOffset()
			return nil
		})
		if err != nil {
			return fmt.Errorf("batch after offset %d: %w", next, err)
		}
		if next == off {
			return fmt.Errorf("read at offset %d returned no batch before the log end %d", off, end)
		}
		off = next
	}
	return nil
}

// control applies a transaction marker of the batch's producer: a COMMIT
// applies the producer's pending offsets unless a newer commit (in log
// order) of the same partition was replayed, as Kafka's load does; an
// ABORT drops them. Other control records (and a batch the cleaner
// emptied) change nothing.
func (r *replay) control(h segment.Header, batch []byte) error {
	m, ok, err := segment.ParseControlBatch(batch)
	switch {
	case errors.Is(err, segment.ErrBadControl):
		r.logger.Warn("group: skipping control batch of __consumer_offsets", "partition", r.partition, "offset", h.BaseOffset, "err", err)
		return nil
	case err != nil || !ok:
		return err
	}
	pend := r.pending[h.ProducerID]
	delete(r.pending, h.ProducerID)
	if !m.Commit() {
		return nil
	}
	for group, offsets := range pend {
		os := r.offsets[group]
		if os == nil {
			os = make(map[tp]offsetEntry)
			r.offsets[group] = os
		}
		for t, e := range offsets {
			if cur, ok := os[t]; !ok || cur.at < e.at {
				os[t] = e
			}
		}
	}
	return nil
}

// batch replays a batch of records: a transactional batch's offsets are
// held pending per producer until its marker.
func (r *replay) batch(h segment.Header, batch []byte, from int64) error {
	it, err := segment.NewRecordIter(batch, segment.DefaultMaxDecompressed)
	if err != nil {
		return err
	}
	for {
		rec, ok, err := it.Next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if rec.Offset < from {
			continue
		}
		r.records++
		lr, err := decodeRecord(rec.Key, rec.Value)
		if err != nil {
			r.skipped++
			r.logger.Warn("group: skipping record of __consumer_offsets", "partition", r.partition, "offset", rec.Offset, "err", err)
			continue
		}
		if lr.offset != nil {
			lr.offset.at = h.BaseOffset
		}
		if lr.isOffset && h.Transactional() {
			r.applyPending(h.ProducerID, lr)
			continue
		}
		r.apply(lr)
	}
}

// applyPending holds a transactional offset record until the producer's
// marker; a tombstone in a transactional batch undoes the producer's
// pending commit of the key, as in Kafka.
func (r *replay) applyPending(producerID int64, lr logRecord) {
	r.see(lr.group)
	t := tp{lr.topic, lr.partition}
	byGroup := r.pending[producerID]
	if byGroup == nil {
		byGroup = make(map[string]map[tp]offsetEntry)
		r.pending[producerID] = byGroup
	}
	if lr.offset == nil {
		delete(byGroup[lr.group], t)
		return
	}
	os := byGroup[lr.group]
	if os == nil {
		os = make(map[tp]offsetEntry)
		byGroup[lr.group] = os
	}
	os[t] = *lr.offset
}

func (r *replay) see(group string) {
	if !r.seen[group] {
		r.seen[group] = true
		r.order = append(r.order, group)
	}
}

func (r *replay) apply(lr logRecord) {
	if lr.share != nil {
		// A share group is no group of this package: its records are
		// kept apart and handed to package share (LoadReport.ShareGroups).
		sr := r.share[lr.group]
		if sr == nil {
			sr = &shareReplay{members: make(map[string]*shareMemberReplay)}
			r.share[lr.group] = sr
			r.shareOrder = append(r.shareOrder, lr.group)
		}
		sr.apply(*lr.share)
		return
	}
	r.see(lr.group)
	if lr.consumer != nil {
		cr := r.consumer[lr.group]
		if cr == nil {
			cr = &consumerReplay{members: make(map[string]*memberReplay)}
			r.consumer[lr.group] = cr
		}
		cr.apply(*lr.consumer)
		return
	}
	if !lr.isOffset {
		r.meta[lr.group] = lr.meta
		if lr.meta == nil {
			// A deleted group takes its pending transactional offsets
			// with it, as deleting it in memory does.
			for _, byGroup := range r.pending {
				delete(byGroup, lr.group)
			}
		}
		return
	}
	t := tp{lr.topic, lr.partition}
	os := r.offsets[lr.group]
	if lr.offset == nil {
		delete(os, t)
		return
	}
	if os == nil {
		os = make(map[tp]offsetEntry)
		r.offsets[lr.group] = os
	}
	os[t] = *lr.offset
}

// build turns the replayed state into groups of partition p.
func (r *replay) build(c *Coordinator, p *partition) []*group {
	var gs []*group
	pendingOf := make(map[string]map[int64]map[tp]offsetEntry)
	for pid, byGroup := range r.pending {
		for id, os := range byGroup {
			if len(os) == 0 {
				continue
			}
			if pendingOf[id] == nil {
				pendingOf[id] = make(map[int64]map[tp]offsetEntry)
			}
			pendingOf[id][pid] = os
		}
	}
	for _, id := range r.order {
		meta, offsets, pending := r.meta[id], r.offsets[id], pendingOf[id]
		cr := r.consumer[id]
		if cr != nil && cr.epoch == nil {
			cr = nil // the consumer group was deleted or became classic
		}
		if meta == nil && len(offsets) == 0 && len(pending) == 0 && cr == nil {
			continue // deleted
		}
		if want := c.PartitionFor(id); want != p.id {
			r.logger.Warn("group: group found in the wrong partition of __consumer_offsets (was offsets.topic.num.partitions changed?); ignored",
				"group", id, "partition", p.id, "belongs", want)
			continue
		}
		g := newGroup(c, id, p)
		g.mu.Lock()
		for t, e := range offsets {
			g.setOffsetLocked(t, e)
		}
		for pid, os := range pending {
			pend := make(map[tp]*txnPending, len(os))
			for t, e := range os {
				pend[t] = &txnPending{entry: e}
				r.numTxnPending++
			}
			g.txnOffsets[pid] = pend
		}
		if cr != nil {
			g.restoreConsumerLocked(cr)
		} else if meta != nil {
			g.restoreLocked(meta)
		}
		r.numOffsets += g.numOffsetsLocked()
		g.mu.Unlock()
		gs = append(gs, g)
	}
	return gs
}

// shareGroups returns the share groups of partition p the records hold,
// in order of first appearance.
func (r *replay) shareGroups(c *Coordinator, p *partition) []ShareGroupState {
	var out []ShareGroupState
	for _, id := range r.shareOrder {
		st, ok := r.share[id].build(id)
		if !ok {
			continue // deleted
		}
		if want := c.PartitionFor(id); want != p.id {
			r.logger.Warn("group: share group found in the wrong partition of __consumer_offsets (was offsets.topic.num.partitions changed?); ignored",
				"group", id, "partition", p.id, "belongs", want)
			continue
		}
		out = append(out, st)
	}
	return out
}

// restoreLocked sets the group from its last metadata record. A group with
// members is Stable at the stored generation; their sessions start now, so
// members that are gone expire and trigger a rebalance.
func (g *group) restoreLocked(v *kmsg.GroupMetadataValue) {
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	if v.CurrentStateTimestamp > 0 {
		g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	}
	if len(v.Members) == 0 || v.Protocol == nil {
		g.state = StateEmpty
		return
	}
	g.protocol = *v.Protocol
	for _, vm := range v.Members {
		m := &member{
			id:               vm.MemberID,
			clientID:         vm.ClientID,
			clientHost:       vm.ClientHost,
			protocolType:     v.ProtocolType,
			protocols:        []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: bytes.Clone(vm.Subscription)}},
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			assignment:       bytes.Clone(vm.Assignment),
		}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		if vm.InstanceID != nil {
			inst := *vm.InstanceID
			m.instanceID = &inst
		}
		g.addMemberLocked(m)
	}
	if v.Leader != nil && g.members[*v.Leader] != nil {
		g.leader = *v.Leader
	}
	g.state = StateStable
	g.subscribed = g.subscribedTopicsLocked()
	for _, m := range g.members {
		g.heartbeatLocked(m)
	}
}
