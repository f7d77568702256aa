package producer

import (
	"errors"
	"fmt"
	"os"

	"github.com/stratastream/strata/segment"
)

// ReadFunc returns whole record batches of the log starting with the batch
// that contains offset from, as many as it likes but at least one when from
// is below the log end; nothing at the log end. (*segment.Log).ReadCopy with
// the log end as maxOffset is one:
//
//	func(from int64) ([]byte, error) { return log.ReadCopy(from, 1<<20, end) }
type ReadFunc func(from int64) ([]byte, error)

// LoadReport says what Load found and did.
type LoadReport struct {
	// SnapshotOffset is the offset of the snapshot the state started
	// from, -1 when it was rebuilt from the log start.
	SnapshotOffset int64
	// Corrupt lists the snapshots that could not be used, with the
	// reason; they were deleted.
	Corrupt []error
	// Truncated lists the snapshots beyond the log end, deleted.
	Truncated []string
	// Pruned lists the old snapshots deleted to keep SnapshotsKept.
	Pruned []string
	// ReplayFrom is where the replay of the log began; Batches counts the
	// batches it read, of any producer or none.
	ReplayFrom int64
	Batches    int
	// Evicted counts the producers forgotten because their last batch is
	// below the log start.
	Evicted int
	// Producers is how many producers the state holds after loading.
	Producers int
	// Completed lists the transactions that markers in the replayed
	// range [ReplayFrom, log end) completed, in marker order: the caller
	// rebuilds the aborted-transaction index from ReplayFrom with the
	// aborted ones.
	Completed []CompletedTxn
}

// Load replaces the state with the one the log [logStart, logEnd) implies,
// using the snapshots in dir: snapshots beyond logEnd (left by a truncation)
// are deleted; the newest other one that decodes is loaded, and a corrupt
// one is deleted and the next older tried, down to none; the batches from
// the loaded snapshot's offset (or logStart, whichever is higher) to logEnd
// are replayed with read; producers whose last batch is below logStart are
// forgotten; all but the newest SnapshotsKept snapshots are deleted.
//
// Call it when a partition opens, and again after the log is truncated
// (replication's TruncateTo, TruncateFullyAndStartAt) with the new bounds,
// with no append running. On error the state is unchanged; an error wraps
// ErrReplay when the log did not yield the expected batches (a corrupt batch
// among them: the log's recovery should have removed it), or is an I/O
// error from dir.
func (s *StateManager) Load(dir string, logStart, logEnd int64, read ReadFunc) (LoadReport, error) {
	return s.LoadRetaining(dir, logStart, logEnd, logStart, read)
}

// LoadRetaining is Load with the producers forgotten below retainFrom
// rather than logStart: a tiered partition's log starts in the object
// store, below the local log start where the replay can begin, and its
// producers whose last batches are only in the store are still its
// producers (Kafka truncates producer state at the log start offset, not
// the local one). retainFrom <= logStart.
func (s *StateManager) LoadRetaining(dir string, logStart, logEnd, retainFrom int64, read ReadFunc) (LoadReport, error) {
	rep := LoadReport{SnapshotOffset: -1}
	if retainFrom > logStart {
		return rep, fmt.Errorf("producer: load: retaining from %d, beyond the log start %d", retainFrom, logStart)
	}
	if logStart > logEnd {
		return rep, fmt.Errorf("producer: load: log start %d beyond log end %d", logStart, logEnd)
	}
	snaps, err := listSnapshots(dir)
	if err != nil {
		return rep, err
	}
	keep := len(snaps)
	for keep > 0 && snaps[keep-1].offset > logEnd {
		keep--
	}
	if rep.Truncated, err = removeSnapshots(dir, snaps[keep:]); err != nil {
		return rep, err
	}
	snaps = snaps[:keep]

	producers := make(map[int64]*entry)
	var unreplicated []CompletedTxn
	for len(snaps) > 0 {
		sf := snaps[len(snaps)-1]
		off, ps, un, err := readSnapshot(sf)
		if err == nil {
			producers, unreplicated, rep.SnapshotOffset = ps, un, off
			break
		}
		if !IsCorrupt(err) {
			return rep, err
		}
		rep.Corrupt = append(rep.Corrupt, err)
		if _, err := removeSnapshots(dir, []snapshotFile{sf}); err != nil {
			return rep, err
		}
		snaps = snaps[:len(snaps)-1]
	}

	// Build the new state aside, swap it in at the end.
	fresh := NewStateManager(logStart)
	fresh.setProducersLocked(producers)
	fresh.mu.unreplicated = unreplicated
	rep.ReplayFrom = max(rep.SnapshotOffset, logStart)
	if rep.Batches, rep.Completed, err = fresh.replay(rep.ReplayFrom, logEnd, read); err != nil {
		return rep, err
	}
	rep.Evicted = fresh.truncateHeadLocked(retainFrom)
	rep.Producers = len(fresh.mu.producers)

	s.mu.Lock()
	s.mu.producers, s.mu.ongoing, s.mu.end, s.mu.unreplicated = fresh.mu.producers, fresh.mu.ongoing, logEnd, fresh.mu.unreplicated
	s.noteUnstableLocked()
	if s.mu.markers == nil {
		s.mu.markers = make(map[int64]uint64)
	}
	for pid, n := range fresh.mu.markers {
		s.mu.markers[pid] += n
	}
	s.mu.Unlock()

	rep.Pruned, err = pruneSnapshots(dir, SnapshotsKept)
	return rep, err
}

// readSnapshot reads and decodes one snapshot file. A file whose content
// names another offset than its name is corrupt.
func readSnapshot(sf snapshotFile) (int64, map[int64]*entry, []CompletedTxn, error) {
	b, err := os.ReadFile(sf.path)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("producer: read snapshot: %w", err)
	}
	off, ps, un, err := decodeSnapshot(b)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%s: %w", sf.path, err)
	}
	if off != sf.offset {
		return 0, nil, nil, fmt.Errorf("%s: %w: holds offset %d", sf.path, ErrCorruptSnapshot, off)
	}
	return off, ps, un, nil
}

var errStop = errors.New("stop")

// replay applies the batches of [from, end) to a state no one else sees yet.
// A batch that ends before from (the one containing from when from is not a
// batch boundary is kept) is skipped.
func (s *StateManager) replay(from, end int64, read ReadFunc) (batches int, completed []CompletedTxn, err error) {
	pos := from
	for pos < end {
		buf, err := read(pos)
		if err != nil {
			return batches, completed, fmt.Errorf("%w: read at offset %d: %w", ErrReplay, pos, err)
		}
		start := pos
		err = segment.SplitBatches(buf, func(h segment.Header, batch []byte) error {
			if h.BaseOffset >= end {
				return errStop
			}
			if h.LastOffset() < pos {
				return nil
			}
			s.updateLocked(h, h.BaseOffset)
			if h.Control() && h.ProducerID >= 0 {
				m, ok, err := segment.ParseControlBatch(batch)
				if err != nil {
					return err
				}
				if ok {
					if c, ok := s.applyMarkerLocked(h.ProducerID, h.ProducerEpoch, m, h.BaseOffset, h.MaxTimestamp); ok {
						completed = append(completed, c)
					}
				}
			}
			batches++
			pos = h.NextOffset()
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return batches, completed, fmt.Errorf("%w: at offset %d: %w", ErrReplay, pos, err)
		}
		if errors.Is(err, errStop) {
			break
		}
		if pos == start {
			return batches, completed, fmt.Errorf("%w: no batch at offset %d, log end %d", ErrReplay, pos, end)
		}
	}
	return batches, completed, nil
}
