package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file connects a partition's log to its idempotent-producer state
// (package producer): the state is rebuilt when the partition opens,
// checked and updated around every append (produced or replicated),
// rebuilt again when replication truncates the log, trimmed by retention
// and snapshotted periodically and at close so a restart replays only the
// tail.

// loadProducers rebuilds the partition's producer state from its latest
// snapshot and the log after it.
func (p *partition) loadProducers(log *slog.Logger) error {
	p.producers = producer.NewStateManager(0)
	if err := p.openTxnIndex(); err != nil {
		return fmt.Errorf("open transaction index: %w", err)
	}
	end := p.log.LogEndOffset()
	rep, err := p.producers.LoadRetaining(p.path(), p.log.LogStartOffset(), end, p.producerStart(), func(from int64) ([]byte, error) {
		return p.log.ReadCopy(from, 1<<20, end)
	})
	if err != nil {
		return fmt.Errorf("rebuild producer state: %w", err)
	}
	if err := p.rebuildTxnIndex(rep.ReplayFrom, rep.Completed); err != nil {
		return fmt.Errorf("rebuild transaction index: %w", err)
	}
	p.snapshotEnd = end
	log.Debug("producer state loaded", "topic", p.topic, "partition", p.index, "report", fmt.Sprintf("%+v", rep))
	return nil
}

// appendProduced checks an idempotent batch against the producer state,
// appends it unless it is a duplicate, and records it. For a duplicate it
// returns the offsets of the original append and does not append.
// batch has passed validateProduceBatch. verified says the batch opens
// the producer's transaction in the partition and its coordinator
// confirmed that (KIP-890) when the partition had applied markers
// markers for the producer: if one came since, the verification is stale
// and the batch is refused with NOT_ENOUGH_REPLICAS, which clients retry.
func (p *partition) appendProduced(batch []byte, opts segment.AppendOptions, verified bool, markers uint64) (segment.AppendResult, error) {
	h, err := segment.ParseHeader(batch)
	if err != nil {
		return segment.AppendResult{}, err
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if verified {
		open, epoch, now := p.producers.InTransaction(h.ProducerID)
		if !open && now != markers {
			return segment.AppendResult{}, newKafkaError(kerr.NotEnoughReplicas, "%v", errMarkerDuringVerify)
		}
		if open && epoch != h.ProducerEpoch {
			// The transaction of an earlier epoch still waits for its
			// marker: the batch must not join it.
			return segment.AppendResult{}, newKafkaError(kerr.NotEnoughReplicas, "producer %d: the transaction of epoch %d is still open here", h.ProducerID, epoch)
		}
	}
	dup, err := p.producers.Check(h)
	if err != nil {
		return segment.AppendResult{}, err
	}
	if dup != nil {
		res := segment.AppendResult{BaseOffset: dup.FirstOffset, LastOffset: dup.LastOffset, LogAppendTime: -1, LogStartOffset: p.log.LogStartOffset()}
		if opts.LogAppendTime > 0 {
			res.LogAppendTime = dup.Timestamp
		}
		return res, nil
	}
	if h.Transactional() && p.producers.HoldAppend(h.ProducerID, p.log.LogEndOffset()) {
		// The batch may open a transaction: readable before Update
		// records it, it must hold the last stable offset meanwhile.
		defer p.producers.ReleaseAppend()
	}
	active := p.log.ActiveBaseOffset()
	res, err := p.log.Append(batch, opts)
	if err != nil {
		return res, err
	}
	if p.log.ActiveBaseOffset() != active {
		// The batch opened a new segment: the state now is the state
		// at the end of the one sealed.
		p.keepRollSnapshot(res.BaseOffset)
	}
	// Append rewrote the base offset (and maybe the timestamps) in place.
	stored, err := segment.ParseHeader(batch)
	if err != nil {
		return res, err
	}
	p.producers.Update(stored, res.BaseOffset)
	return res, nil
}

// rollSnapshots keeps the producer state at a partition's latest segment
// rolls, encoded, for the archiver to upload with each sealed segment
// (Kafka snapshots the producer state at every roll, and tiered storage
// uploads it with the segment): a replica that starts at the leader's
// local log start, or a restore, reads it from the bucket. The archiver
// uploads a segment soon after it is sealed; older entries are dropped.
type rollSnapshots struct {
	mu      sync.Mutex
	offsets []int64 // oldest first
	data    map[int64][]byte
}

// rollSnapshotsKept bounds rollSnapshots.
const rollSnapshotsKept = 8

func (r *rollSnapshots) put(offset int64, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.data == nil {
		r.data = map[int64][]byte{}
	}
	if _, ok := r.data[offset]; !ok {
		r.offsets = append(r.offsets, offset)
	}
	r.data[offset] = b
	for len(r.offsets) > rollSnapshotsKept {
		delete(r.data, r.offsets[0])
		r.offsets = r.offsets[1:]
	}
}

// get implements tiering.ArchiverConfig.ProducerSnapshot.
func (r *rollSnapshots) get(offset int64) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.data[offset]
	return b, ok
}

// keepRollSnapshot records the producer state as the state at offset,
// where a segment of a tiered partition just ended. Caller holds appendMu
// and has applied every batch below offset, none at or above it.
func (p *partition) keepRollSnapshot(offset int64) {
	if p.tier == nil || !p.tier.gate.Tiered() {
		return
	}
	if b, err := p.producers.EncodeSnapshot(offset); err == nil {
		p.rollSnaps.put(offset, b)
	}
}

// trimProducers forgets producer batches below the log start offset, after
// retention moved it.
func (p *partition) trimProducers() {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	p.producers.TruncateHead(p.producerStart())
	_ = p.dropTxnIndexBelowLog() // a failure leaves files that the next pass (or the next open) removes
}

// producerStart is the offset below which the partition forgets its
// producers: the log start offset, which for a partition with data in
// the object store is the remote log start (local retention deletes
// segments that are still part of the log; Kafka keeps their producers
// too). While a tiered partition's manifest is not known yet (it has just
// opened), nothing is forgotten; the next retention pass trims. Never
// above the local log start.
//
// The remote log start counts even when the manifest this broker last
// read ends below the local log start (logStart does not take it then):
// a follower that moved its local start up to the leader's reads the
// manifest that reaches there only later, and must not forget the
// producers in between meanwhile (a CI run lost one that way). Keeping
// a producer too long costs a little memory; forgetting it early fails
// its next produce.
func (p *partition) producerStart() int64 {
	local := p.log.LogStartOffset()
	if p.tier == nil || (!p.tier.gate.Tiered() && p.tier.manifest() == nil) {
		return local
	}
	if p.tier.manifest() == nil {
		return 0
	}
	if m := p.remoteManifest(); m != nil {
		return min(m.LogStartOffset, local)
	}
	return local
}

// snapshotProducers writes a producer-state snapshot at the log end if the
// log grew since the last one.
func (p *partition) snapshotProducers() error {
	p.appendMu.Lock()
	p.producers.LastStableOffset(p.log.HighWatermark()) // forget replicated completed transactions
	end := p.log.LogEndOffset()
	if end == p.snapshotEnd {
		p.appendMu.Unlock()
		return nil
	}
	data, err := p.producers.EncodeSnapshot(end)
	if err == nil {
		p.snapshotEnd = end
	}
	p.appendMu.Unlock()
	if err != nil {
		return err
	}
	// The index entries below end must be durable before a snapshot at
	// end says the replay may start there.
	if err := p.txns.Sync(); err != nil {
		return err
	}
	return producer.WriteSnapshot(p.path(), end, data)
}

// appendReplicatedLocked appends the leader's batches verbatim and
// records their producers. Caller holds appendMu.
func (p *partition) appendReplicatedLocked(recs []byte) error {
	active := p.log.ActiveBaseOffset()
	if _, err := p.log.AppendReplicated(recs); err != nil {
		return err
	}
	// The segments the append rolled to: the producer state is captured
	// at each of their starts, the end of the segment before.
	var rolls []int64
	if p.log.ActiveBaseOffset() != active {
		for _, si := range p.log.Segments() {
			if si.BaseOffset > active {
				rolls = append(rolls, si.BaseOffset)
			}
		}
	}
	for off := 0; off < len(recs); {
		h, err := segment.ParseHeader(recs[off:])
		if err != nil {
			return err // validated by AppendReplicated: not reached
		}
		for len(rolls) > 0 && rolls[0] <= h.BaseOffset {
			p.keepRollSnapshot(rolls[0])
			rolls = rolls[1:]
		}
		switch {
		case h.ProducerID >= 0 && h.Control():
			// A control record other than a marker (none is written
			// here) changes no producer state.
			m, ok, err := segment.ParseControlBatch(recs[off : off+h.Size()])
			if err != nil && !errors.Is(err, segment.ErrBadControl) {
				return err
			}
			p.producers.Update(h, h.BaseOffset)
			if ok && err == nil {
				if err := p.applyMarkerLocked(h, m, h.BaseOffset); err != nil {
					return err
				}
			}
		case h.ProducerID >= 0:
			p.producers.Update(h, h.BaseOffset)
		}
		off += h.Size()
	}
	// Completed transactions stop being tracked once the high watermark
	// passes their markers; a follower serves no fetch that would do it.
	p.producers.LastStableOffset(p.log.HighWatermark())
	return nil
}

// reloadProducersLocked rebuilds the producer state after a truncation.
// Caller holds appendMu.
func (p *partition) reloadProducersLocked() error {
	end := p.log.LogEndOffset()
	rep, err := p.producers.LoadRetaining(p.path(), p.log.LogStartOffset(), end, p.producerStart(), func(from int64) ([]byte, error) {
		return p.log.ReadCopy(from, 1<<20, end)
	})
	p.snapshotEnd = end
	if err != nil {
		return err
	}
	if err := p.dropTxnIndexBelowLog(); err != nil {
		return err
	}
	return p.rebuildTxnIndex(rep.ReplayFrom, rep.Completed)
}
