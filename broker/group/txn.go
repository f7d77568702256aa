package group

// TxnOffsetCommit: versions 0-5.
//
// Behavior:
//   - The offsets of a transactional producer (KIP-98): written to the
//     group's partition of __consumer_offsets as one transactional record
//     batch carrying the producer id and epoch (base sequence -1, as
//     Kafka's coordinator writes it), then held pending per (group,
//     producer) and invisible to OffsetFetch until the transaction's
//     COMMIT marker lands on that partition (TxnMarker); an ABORT drops
//     them. A committed one replaces the group's offset unless a commit
//     newer in log order is already there, as Kafka's GroupMetadata does.
//   - Errors of the whole request go to every partition: an empty group
//     id: INVALID_GROUP_ID; NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
//     (COORDINATOR_NOT_AVAILABLE for v0-v1, which cannot handle it, as
//     Kafka), COORDINATOR_NOT_AVAILABLE after Close or for a Dead group.
//   - Before anything is written the verifier (KIP-890) asks the
//     producer's transaction coordinator whether the partition is part
//     of the producer's ongoing transaction; its error is answered,
//     converted as Kafka's maybeConvertOffsetCommitError does.
//   - v3 (KIP-447) names the member: generation -1 with an Empty group is
//     accepted; a generation, a member id or an instance id must name a
//     current member (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) of the current
//     generation (ILLEGAL_GENERATION). Unlike OffsetCommit, generation -1
//     without a member may commit into a group that has members (v0-v2
//     clients send nothing else), and the group's state is not checked.
//     An unknown group is created Empty.
//   - Per partition: a partition Config.PartitionExists denies:
//     UNKNOWN_TOPIC_OR_PARTITION, before anything else (as Kafka's request
//     handler; a request with only such partitions goes no further);
//     metadata longer than OffsetMetadataMaxBytes:
//     OFFSET_METADATA_TOO_LARGE. The committed leader epoch (v2+) is
//     stored.
//   - The answer comes after the batch is appended. A failed append:
//     NOT_COORDINATOR, nothing pending.

import (
	"context"
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

// TxnVerifier asks the transaction coordinator of the request's producer
// whether the given partition of __consumer_offsets is part of the
// producer's ongoing transaction (KIP-890 verification). It returns nil if
// it is, else an error wrapping the *kerr.Error to answer; an error that
// wraps no Kafka error is answered COORDINATOR_LOAD_IN_PROGRESS, which
// clients retry. It is called with no lock held.
type TxnVerifier func(ctx context.Context, partition int) error

// txnPending is one transactional commit of a producer, waiting for the
// producer's marker. Its entry's at is -1 until the batch is appended.
type txnPending struct {
	entry offsetEntry
}

// txnMarker is a marker that arrived while its partition was loading.
type txnMarker struct {
	producerID int64
	commit     bool
}

// TxnOffsetCommit handles a TxnOffsetCommit request; it blocks until the
// offsets are appended to the log, or ctx is done. verify may be nil
// (nothing to verify against).
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest, verify TxnVerifier) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	// As Kafka's KafkaApis, partitions that do not exist are answered
	// before the coordinator looks at the request; if none is left, the
	// group is not touched.
	left := 0
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			if len(t.Topic) > maxStringLen || (c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(t.Topic, p.Partition)) {
				resp.Topics[i].Partitions[j].ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				left++
			}
		}
	}
	var code int16
	if left > 0 {
		code = c.txnOffsetCommit(ctx, req, resp, verify)
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			rp := &resp.Topics[i].Partitions[j]
			if code != 0 && rp.ErrorCode == 0 {
				rp.ErrorCode = code
			}
			if req.Version < 2 && rp.ErrorCode == kerr.CoordinatorLoadInProgress.Code {
				// Clients before KAFKA-7296 do not retry it.
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			}
		}
	}
	return resp
}

// txnOffsetCommit does the work of TxnOffsetCommit for the partitions
// without an error in resp: it returns the error of every partition that
// has none of its own.
func (c *Coordinator) txnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest, resp *kmsg.TxnOffsetCommitResponse, verify TxnVerifier) int16 {
	if !validGroupID(req.Group, false) {
		return kerr.InvalidGroupID.Code
	}
	switch {
	case req.ProducerID < 0:
		return kerr.InvalidProducerIDMapping.Code // no producer: what the verification answers
	case req.ProducerEpoch < 0:
		return kerr.InvalidProducerEpoch.Code
	}
	if _, code := c.lookup(req.Group, false); code != 0 {
		return code
	}
	if verify != nil {
		if err := verify(ctx, c.PartitionFor(req.Group)); err != nil {
			return verifyErrorCode(err)
		}
	}
	g, code := c.lookup(req.Group, true)
	if code != 0 {
		return code
	}

	g.mu.Lock()
	if code := g.validateTxnCommitLocked(req); code != 0 {
		g.mu.Unlock()
		return code
	}
	now := c.cfg.Now().UnixMilli()
	type staged struct {
		at  [2]int // topic, partition index in the response
		tp  tp
		pen *txnPending
	}
	var batch []staged
	var recs []kv
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			rp := &resp.Topics[i].Partitions[j]
			if rp.ErrorCode != 0 {
				continue // does not exist
			}
			meta := ""
			if p.Metadata != nil {
				meta = strings.Clone(*p.Metadata)
			}
			if len(meta) > c.cfg.OffsetMetadataMaxBytes {
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			e := offsetEntry{offset: p.Offset, leaderEpoch: -1, metadata: meta, commitTime: now, expireTime: -1, at: -1}
			if req.Version >= 2 {
				e.leaderEpoch = p.LeaderEpoch
			}
			batch = append(batch, staged{at: [2]int{i, j}, tp: tp{strings.Clone(t.Topic), p.Partition}, pen: &txnPending{entry: e}})
			recs = append(recs, kv{key: offsetKey(g.id, t.Topic, p.Partition), value: offsetValue(e)})
		}
	}
	if len(batch) == 0 {
		g.mu.Unlock()
		return 0
	}
	fail := func(code int16) int16 {
		for _, s := range batch {
			resp.Topics[s.at[0]].Partitions[s.at[1]].ErrorCode = code
		}
		return 0
	}
	data, err := buildTxnBatch(now, req.ProducerID, req.ProducerEpoch, recs)
	if err != nil {
		g.mu.Unlock()
		c.cfg.Logger.Error("group: encoding transactional offset commit failed", "group", g.id, "err", err)
		return fail(kerr.UnknownServerError.Code)
	}
	pid := req.ProducerID
	pend := g.txnOffsets[pid]
	if pend == nil {
		pend = make(map[tp]*txnPending)
		g.txnOffsets[pid] = pend
	}
	for _, s := range batch {
		pend[s.tp] = s.pen
	}
	c.addTxnProducer(pid, g)
	// unstage drops what this request staged and is still there (a later
	// commit of the same producer may have replaced it).
	unstage := func() {
		pend := g.txnOffsets[pid]
		for _, s := range batch {
			if pend[s.tp] == s.pen {
				delete(pend, s.tp)
			}
		}
		if len(pend) == 0 {
			delete(g.txnOffsets, pid)
			c.removeTxnProducer(pid, g)
		}
	}
	done := make(chan error, 1)
	err = g.part.w.enqueue(data, func(at int64, err error) {
		g.mu.Lock()
		if err == nil {
			for _, s := range batch {
				s.pen.entry.at = at
			}
		} else {
			unstage()
		}
		g.mu.Unlock()
		done <- err
	})
	if err != nil {
		unstage()
		g.mu.Unlock()
		return fail(kerr.NotCoordinator.Code)
	}
	g.mu.Unlock()

	select {
	case err := <-done:
		if err != nil {
			return fail(kerr.NotCoordinator.Code)
		}
		return 0
	case <-ctx.Done():
		// The append goes on and the offsets stay pending if it succeeds;
		// the client will not read this answer.
		return fail(kerr.RequestTimedOut.Code)
	}
}

// validateTxnCommitLocked checks who commits, as Kafka's
// validateOffsetCommit does for a transactional commit.
func (g *group) validateTxnCommitLocked(req *kmsg.TxnOffsetCommitRequest) int16 {
	switch {
	case g.state == StateDead:
		return kerr.CoordinatorNotAvailable.Code
	case g.consumer != nil:
		return g.consumer.validateCommit(req.MemberID, req.Generation, false)
	case req.Generation < 0 && g.state == StateEmpty:
		return 0
	case req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil:
		if code := g.validateMemberLocked(req.MemberID, req.InstanceID); code != 0 {
			return code
		}
		if req.Generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	}
	return 0
}

// verifyErrorCode is the code a TxnOffsetCommit answers for a failed
// verification: Kafka's maybeConvertOffsetCommitError of the error.
func verifyErrorCode(err error) int16 {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.CoordinatorLoadInProgress.Code
	}
	switch ke {
	case kerr.NetworkException:
		return kerr.CoordinatorLoadInProgress.Code
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
		return kerr.InvalidCommitOffsetSize.Code
	}
	return ke.Code
}

// buildTxnBatch encodes records as one uncompressed transactional record
// batch v2 of the producer, with base sequence -1 (Kafka's coordinator
// appends its transactional offset commits without a sequence).
func buildTxnBatch(ts int64, producerID int64, epoch int16, recs []kv) ([]byte, error) {
	rs := make([]segment.Record, len(recs))
	for i, r := range recs {
		rs[i] = segment.Record{Timestamp: ts, Key: r.key, Value: r.value}
	}
	return segment.BuildBatch(segment.BatchSpec{
		PartitionLeaderEpoch: -1,
		Idempotent:           true,
		ProducerID:           producerID,
		ProducerEpoch:        epoch,
		BaseSequence:         -1,
		Transactional:        true,
		Records:              rs,
	})
}

// TxnMarker completes the transactional offset commits of a producer in
// the groups of a partition of __consumer_offsets, once the producer's
// COMMIT (commit set) or ABORT marker is durably in that partition: a
// commit applies each pending offset unless the group holds a commit of
// that partition newer in log order; an abort drops them. A marker for a
// partition that is loading is applied when the load ends (the replay may
// or may not have seen it; applying it again finds nothing pending). A
// partition the coordinator does not own is left alone: its next Load
// replays the marker from the log. TxnMarker does not block on I/O.
func (c *Coordinator) TxnMarker(partitionID int, producerID int64, commit bool) {
	c.mu.Lock()
	p := c.mu.partitions[partitionID]
	if p == nil || c.mu.closed {
		c.mu.Unlock()
		return
	}
	if p.loading {
		p.markers = append(p.markers, txnMarker{producerID: producerID, commit: commit})
		c.mu.Unlock()
		return
	}
	var gs []*group
	for g := range c.mu.txnProducers[producerID] {
		if g.part == p && c.mu.groups[g.id] == g {
			gs = append(gs, g)
		}
	}
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		g.completeTxnLocked(producerID, commit)
		g.mu.Unlock()
	}
}

// completeTxnLocked applies (commit) or drops the producer's pending
// offsets.
func (g *group) completeTxnLocked(producerID int64, commit bool) {
	pend, ok := g.txnOffsets[producerID]
	if !ok {
		return
	}
	delete(g.txnOffsets, producerID)
	g.c.removeTxnProducer(producerID, g)
	if !commit || g.state == StateDead {
		return
	}
	for t, pen := range pend {
		if pen.entry.at < 0 {
			// The marker came before the commit's own append finished:
			// the transaction coordinator does not do that. Kafka throws.
			g.c.cfg.Logger.Error("group: transaction marker before its offset commit was appended; offset not applied",
				"group", g.id, "producer", producerID, "topic", t.topic, "partition", t.partition)
			continue
		}
		g.commitOffsetLocked(t, pen.entry)
	}
}

// hasPendingLocked reports whether a commit of t waits: a plain one being
// appended, or a transactional one waiting for its marker. OffsetFetch
// with require_stable answers UNSTABLE_OFFSET_COMMIT for it (KIP-447).
func (g *group) hasPendingLocked(t tp) bool {
	if g.pendingCommits[t] > 0 {
		return true
	}
	for _, pend := range g.txnOffsets {
		if _, ok := pend[t]; ok {
			return true
		}
	}
	return false
}

// addTxnProducer records that g holds pending offsets of the producer. The
// caller holds g.mu (lock order: group, then coordinator).
func (c *Coordinator) addTxnProducer(producerID int64, g *group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gs := c.mu.txnProducers[producerID]
	if gs == nil {
		gs = make(map[*group]struct{})
		c.mu.txnProducers[producerID] = gs
	}
	gs[g] = struct{}{}
}

// removeTxnProducer undoes addTxnProducer. The caller holds g.mu.
func (c *Coordinator) removeTxnProducer(producerID int64, g *group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeTxnProducerLocked(producerID, g)
}

func (c *Coordinator) removeTxnProducerLocked(producerID int64, g *group) {
	if gs := c.mu.txnProducers[producerID]; gs != nil {
		delete(gs, g)
		if len(gs) == 0 {
			delete(c.mu.txnProducers, producerID)
		}
	}
}

// forgetTxnProducersLocked drops every producer entry of the groups for
// which drop is true. The caller holds c.mu.
func (c *Coordinator) forgetTxnProducersLocked(drop func(*group) bool) {
	for pid, gs := range c.mu.txnProducers {
		for g := range gs {
			if drop(g) {
				delete(gs, g)
			}
		}
		if len(gs) == 0 {
			delete(c.mu.txnProducers, pid)
		}
	}
}
