package broker

import (
	"fmt"
	"log/slog"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/segment"
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
	end := p.log.LogEndOffset()
	rep, err := p.producers.Load(p.path(), p.log.LogStartOffset(), end, func(from int64) ([]byte, error) {
		return p.log.ReadCopy(from, 1<<20, end)
	})
	if err != nil {
		return fmt.Errorf("rebuild producer state: %w", err)
	}
	p.snapshotEnd = end
	log.Debug("producer state loaded", "topic", p.topic, "partition", p.index, "report", fmt.Sprintf("%+v", rep))
	return nil
}

// appendProduced checks an idempotent batch against the producer state,
// appends it unless it is a duplicate, and records it. For a duplicate it
// returns the offsets of the original append and does not append.
// batch has passed validateProduceBatch.
func (p *partition) appendProduced(batch []byte, opts segment.AppendOptions) (segment.AppendResult, error) {
	h, err := segment.ParseHeader(batch)
	if err != nil {
		return segment.AppendResult{}, err
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
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
	res, err := p.log.Append(batch, opts)
	if err != nil {
		return res, err
	}
	// Append rewrote the base offset (and maybe the timestamps) in place.
	stored, err := segment.ParseHeader(batch)
	if err != nil {
		return res, err
	}
	p.producers.Update(stored, res.BaseOffset)
	return res, nil
}

// trimProducers forgets producer batches below the log start offset, after
// retention moved it.
func (p *partition) trimProducers() {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	p.producers.TruncateHead(p.log.LogStartOffset())
}

// snapshotProducers writes a producer-state snapshot at the log end if the
// log grew since the last one.
func (p *partition) snapshotProducers() error {
	p.appendMu.Lock()
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
	return producer.WriteSnapshot(p.path(), end, data)
}

// appendReplicatedLocked appends the leader's batches verbatim and
// records their producers. Caller holds appendMu.
func (p *partition) appendReplicatedLocked(recs []byte) error {
	if _, err := p.log.AppendReplicated(recs); err != nil {
		return err
	}
	for off := 0; off < len(recs); {
		h, err := segment.ParseHeader(recs[off:])
		if err != nil {
			return err // validated by AppendReplicated: not reached
		}
		if h.ProducerID >= 0 && !h.Control() {
			p.producers.Update(h, h.BaseOffset)
		}
		off += h.Size()
	}
	return nil
}

// reloadProducersLocked rebuilds the producer state after a truncation.
// Caller holds appendMu.
func (p *partition) reloadProducersLocked() error {
	end := p.log.LogEndOffset()
	_, err := p.producers.Load(p.path(), p.log.LogStartOffset(), end, func(from int64) ([]byte, error) {
		return p.log.ReadCopy(from, 1<<20, end)
	})
	p.snapshotEnd = end
	return err
}
