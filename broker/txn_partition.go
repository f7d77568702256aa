package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file is the partition's side of transactions (KIP-98): the
// aborted-transaction index kept beside the segments, the markers the
// leader appends (WriteTxnMarkers) and followers replicate, and the last
// stable offset that read_committed consumers read up to.
//
// The producer state (package producer) knows each producer's open
// transaction; a marker completes it, and an aborted one becomes an entry
// of the index (segment.TxnIndex), filed under the segment holding the
// marker. The index is rebuilt from the producer state's replay at open
// and after a truncation: entries from the replay's start are dropped and
// re-added from the markers the replay met; everything below a snapshot is
// in the index durably because the index is fsynced before each snapshot.

// openTxnIndex opens the partition's aborted-transaction index and drops
// the files of segments that no longer exist.
func (p *partition) openTxnIndex() error {
	x, warns, err := segment.OpenTxnIndex(p.path())
	if err != nil {
		return err
	}
	_ = warns // cut tails are rebuilt by the replay when above the snapshot
	x.FollowDir(p.path)
	p.txns = x
	return p.dropTxnIndexBelowLog()
}

// dropTxnIndexBelowLog deletes the index files of segments below the
// first local segment. A tiered partition keeps them only in the bucket.
func (p *partition) dropTxnIndexBelowLog() error {
	segs := p.log.Segments()
	if len(segs) == 0 {
		return nil
	}
	return p.txns.DropSegmentsBelow(segs[0].BaseOffset)
}

// rebuildTxnIndex replaces the index from offset from on with the aborted
// transactions of completed, which a replay of the log from there found.
func (p *partition) rebuildTxnIndex(from int64, completed []producer.CompletedTxn) error {
	if err := p.txns.TruncateTo(from); err != nil {
		return err
	}
	for _, c := range completed {
		if c.Aborted {
			if err := p.txns.Append(p.segmentBaseOf(c.LastOffset), c.AbortedTxn()); err != nil {
				return err
			}
		}
	}
	return nil
}

// segmentBaseOf is the base offset of the local segment holding off.
func (p *partition) segmentBaseOf(off int64) int64 {
	segs := p.log.Segments()
	base := int64(0)
	for _, si := range segs {
		if si.BaseOffset > off {
			break
		}
		base = si.BaseOffset
	}
	return base
}

// applyMarkerLocked records a marker batch (stored header h, at offset) in
// the producer state and, when it aborted a transaction, in the index.
// Caller holds appendMu.
func (p *partition) applyMarkerLocked(h segment.Header, m segment.ControlRecord, offset int64) error {
	c, ok := p.producers.ApplyMarker(h, m, offset)
	if !ok || !c.Aborted {
		return nil
	}
	return p.txns.Append(p.segmentBaseOf(offset), c.AbortedTxn())
}

// txnMarker is one WriteTxnMarkers marker for a partition.
type txnMarker struct {
	pid              int64
	epoch            int16
	commit           bool
	coordinatorEpoch int32
	version          int8 // the transaction's version (WriteTxnMarkers v2)
}

// appendMarker appends a transaction marker for the producer as the
// leader of epoch leaderEpoch, after the producer state's fencing checks
// (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED).
func (p *partition) appendMarker(self int32, tm txnMarker, nowMs int64) (segment.AppendResult, int32, error) {
	batch := segment.ControlBatch(tm.pid, tm.epoch, tm.commit, tm.coordinatorEpoch, nowMs)
	m := segment.ControlRecord{Type: segment.ControlAbort, CoordinatorEpoch: tm.coordinatorEpoch}
	if tm.commit {
		m.Type = segment.ControlCommit
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	lead, err := p.leaderCheck(self)
	if err != nil {
		return segment.AppendResult{}, 0, err
	}
	if err := p.producers.CheckMarker(tm.pid, tm.epoch, tm.coordinatorEpoch, tm.version >= 2); err != nil {
		return segment.AppendResult{}, 0, err
	}
	active := p.log.ActiveBaseOffset()
	res, err := p.log.Append(batch, segment.AppendOptions{LeaderEpoch: lead.epoch})
	if err != nil {
		return res, 0, err
	}
	if p.log.ActiveBaseOffset() != active {
		p.keepRollSnapshot(res.BaseOffset)
	}
	stored, err := segment.ParseHeader(batch)
	if err != nil {
		return res, 0, err
	}
	if err := p.applyMarkerLocked(stored, m, res.BaseOffset); err != nil {
		return res, 0, fmt.Errorf("%w: %w", errTxnIndex, err)
	}
	return res, lead.epoch, nil
}

// segmentTxnIndex implements tiering.ArchiverConfig.TxnIndex: the index
// entries of the local segment at base with a marker at or after from.
func (p *partition) segmentTxnIndex(base, from int64) []byte {
	for _, si := range p.log.Segments() {
		if si.BaseOffset == base {
			return p.txns.EncodeRange(max(base, from), si.NextOffset)
		}
	}
	return nil
}

// lastStableOffset is what read_committed consumers may read up to: the
// high watermark, held at the first offset of the earliest transaction
// that is open or whose marker is not replicated yet.
func (p *partition) lastStableOffset() int64 {
	return p.lastStableOffsetAt(p.log.HighWatermark())
}

// lastStableOffsetAt is lastStableOffset for the high watermark hw, never
// below the log start (an open transaction whose first records
// DeleteRecords or retention removed: Kafka's
// maybeIncrementFirstUnstableOffset clamps it the same way). The log
// start is producerStart's: a tiered partition whose manifest is not
// known yet (just opened or restored) is not clamped to its local start.
func (p *partition) lastStableOffsetAt(hw int64) int64 {
	lso := p.producers.LastStableOffset(hw)
	if lso < hw {
		lso = min(max(lso, p.producerStart()), hw)
	}
	return lso
}

// abortedTxns are the aborted transactions a read_committed fetch of
// [from, upTo) returns: from the remote segments' indexes when from is
// below the local log start of a tiered partition (until an entry says
// no earlier transaction is open any more), then from the local index.
func (s *Server) abortedTxns(p *partition, from, upTo int64) ([]segment.AbortedTxn, error) {
	var out []segment.AbortedTxn
	if s.tier != nil && from < p.log.LogStartOffset() {
		if m := p.remoteManifest(); m != nil {
			ctx, cancel := context.WithTimeout(context.Background(), remoteFetchTimeout)
			remote, complete, err := s.tier.reader.AbortedTxns(ctx, m, from, upTo)
			cancel()
			if err != nil {
				return nil, err
			}
			if complete {
				return remote, nil
			}
			out = remote
		}
	}
	seen := make(map[int64]bool, len(out))
	for _, a := range out {
		seen[a.LastOffset] = true
	}
	for _, a := range p.txns.CollectAborted(from, upTo) {
		if !seen[a.LastOffset] {
			out = append(out, a)
		}
	}
	return out, nil
}

// verifyFirstTxnBatch is KIP-890's verification of a producer's first
// transactional batch in the partition: asked of the transaction
// coordinator before the append lock is taken. It returns the marker count
// to compare under the lock (see appendProduced), and whether a
// verification happened. chk says how the coordinator is asked: under
// transaction version 2 the partition is added to the transaction
// (always: the client sent no AddPartitionsToTxn), else verified when
// transaction.partition.verification.enable is on.
func (s *Server) verifyFirstTxnBatch(ctx context.Context, chk txnCheck, p *partition, transactionalID *string, h segment.Header) (markers uint64, verified bool, err error) {
	if !h.Transactional() || h.ProducerID < 0 || transactionalID == nil || !(chk.add || s.cfg.Transactions.PartitionVerification) {
		return 0, false, nil
	}
	// A batch of a later epoch than the open transaction's is verified
	// too (Kafka 4.x's hasOngoingTransaction at the epoch): under
	// transaction version 2 it is the producer's next transaction, begun
	// while the previous one's marker is still on its way, and must wait
	// until the coordinator has completed that one.
	open, epoch, markers := p.producers.InTransaction(h.ProducerID)
	if open && epoch == h.ProducerEpoch {
		return 0, false, nil
	}
	if err := s.verifyTxnPartition(ctx, chk, *transactionalID, h.ProducerID, h.ProducerEpoch, p.topic, p.index); err != nil {
		return 0, false, verifyError(err)
	}
	return markers, true, nil
}

// verifyError maps a verification failure to the produce's error: the
// coordinator's own unavailability becomes NOT_ENOUGH_REPLICAS, which
// clients retry, as Kafka answers.
func verifyError(err error) error {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return newKafkaError(kerr.NotEnoughReplicas, "transaction verification: %v", err)
	}
	switch ke.Code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code:
		return newKafkaError(kerr.NotEnoughReplicas, "transaction verification: %v", err)
	}
	return newKafkaError(ke, "transaction verification: %v", err)
}

// errTxnIndex marks a marker that was appended but whose abort could not
// be written to the aborted-transaction index: the replica goes offline
// (its disk is failing), and a restart rebuilds the index by replay.
var errTxnIndex = errors.New("aborted-transaction index")

// errMarkerDuringVerify says a marker for the producer was appended while
// its first transactional batch was being verified: the verification is
// stale and the client retries.
var errMarkerDuringVerify = fmt.Errorf("a transaction marker arrived while the batch was verified")
