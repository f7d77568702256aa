package segment

import (
	"fmt"
	"sort"
)

// Transactions in compaction (Kafka's Cleaner with the aborted-transaction
// index): the records of aborted transactions are dropped from the
// cleaned section, as Kafka's cleaner discards them, so that they never
// outlive or shadow committed data. An aborted transaction's records are
// never put in the offset map, so they never remove an older committed
// value; a committed transaction's are, when CleanConfig.TxnsComplete
// vouches for the aborted list (else no transactional record is mapped);
// and the broker bounds the dirty section by the last stable offset
// (CleanConfig.UncleanableFrom), so open transactions are not cleaned.
// An aborted transaction's data batches are emptied like any batch that
// keeps nothing: dropped, or kept empty when it is its producer's last.
//
// Markers (control batches) are removed as Kafka's cleaner removes them
// (LogCleaner's CleanedTransactionMetadata, KIP-534's delete horizon),
// when the cleaning vouches for the transactions (TxnsComplete): going
// through the log from its start, a marker below the mapped end whose
// transaction has no batch left before it (a COMMIT: no transactional
// batch of its producer since the producer's previous marker; an ABORT:
// no batch of the aborted transaction, emptied ones included) gets a
// delete horizon (now + delete.retention.ms) and is dropped by the first
// cleaning after that horizon. A marker whose transaction still has a
// batch, a marker at or above the mapped end (the dirty section ends at
// the last stable offset, so an open transaction's marker-to-be is never
// reached), and every marker of a cleaning that lost track of its
// batches (a group abandoned midway) are kept whole.
//
// The aborted-transaction index (the broker's TxnIndex, not rewritten by
// the swap) lists an aborted transaction until its data is gone: the
// cleaning reports such transactions in CleanResult.AbortedTxnsDone and
// the broker then removes their entries, as Kafka leaves them out of the
// cleaned segment's index. An ABORT marker is removed only once its entry
// is no longer in CleanConfig.AbortedTxns, so the index never names a
// transaction without its marker (a read_committed consumer that was told
// of an aborted transaction skips its producer's batches until it reads
// the ABORT marker).
//
// Unlike Kafka, a marker is not kept for being its producer's last entry
// (Kafka keeps it when the producer state has no data offset for the
// producer); the producer's last data batch is kept, and the producer
// state snapshots hold the epoch.

// markerTracker follows the transactions of the batches a cleaning reads,
// in offset order from the log start: Kafka's CleanedTransactionMetadata.
type markerTracker struct {
	on   bool // markers may be removed (Log.Clean with TxnsComplete)
	lost bool // a group was abandoned midway: keep every marker from now on

	committedOpen map[int64]bool // producer -> a transactional batch of a non-aborted transaction since its last marker
	abortedSeen   map[int64]bool // producer -> a batch of its current aborted transaction was read
	// indexed holds the index's entries by producer and marker offset.
	indexed map[[2]int64]AbortedTxn
}

func newMarkerTracker(on bool, aborted []AbortedTxn) markerTracker {
	t := markerTracker{on: on}
	if !on {
		return t
	}
	t.committedOpen, t.abortedSeen = map[int64]bool{}, map[int64]bool{}
	t.indexed = make(map[[2]int64]AbortedTxn, len(aborted))
	for _, a := range aborted {
		t.indexed[[2]int64{a.ProducerID, a.LastOffset}] = a
	}
	return t
}

// onDataBatch records a data batch below the mapped end.
func (t *markerTracker) onDataBatch(h Header, aborted abortedSet) {
	if !t.on || !h.Transactional() {
		return
	}
	if aborted.contains(h.ProducerID, h.BaseOffset) {
		t.abortedSeen[h.ProducerID] = true
	} else {
		t.committedOpen[h.ProducerID] = true
	}
}

// filterMarker handles a control batch below the mapped end when markers
// are tracked: it appends the batch whole, with a new delete horizon, or
// nothing (see the top of this file).
func (f *batchFilter) filterMarker(dst, b []byte, h Header) ([]byte, error) {
	t := &f.txn
	if h.RecordCount == 0 {
		// An emptied control batch (Kafka's cleaner may leave one):
		// nothing to keep, as Kafka discards it.
		f.stats.MarkersRemoved++
		return dst, nil
	}
	it, err := NewRecordIter(b, f.maxDecompressed)
	if err != nil {
		return dst, fmt.Errorf("segment: clean: marker at %d: %w", h.BaseOffset, err)
	}
	rec, ok, err := it.Next()
	if err == nil && !ok {
		err = fmt.Errorf("%w: no record", ErrBadControl)
	}
	var c ControlRecord
	if err == nil {
		c, err = ParseControlRecord(rec.Key, rec.Value)
	}
	if err != nil {
		return dst, fmt.Errorf("segment: clean: marker at %d: %w", h.BaseOffset, err)
	}
	pid := h.ProducerID
	var empty, listed bool // the transaction has no batch left; the index still lists it
	if c.Commit() {
		empty = !t.committedOpen[pid]
		delete(t.committedOpen, pid)
	} else {
		empty = !t.abortedSeen[pid]
		delete(t.abortedSeen, pid)
		var e AbortedTxn
		if e, listed = t.indexed[[2]int64{pid, h.BaseOffset}]; listed && empty && !t.lost {
			f.stats.AbortedTxnsDone = append(f.stats.AbortedTxnsDone, e)
		}
	}
	horizon, hasHorizon := h.DeleteHorizon()
	switch {
	case !empty || t.lost:
	case hasHorizon && horizon <= f.nowMs && !listed:
		f.stats.MarkersRemoved++
		return dst, nil
	case !hasHorizon:
		rh, data, err := batchRecords(b, h, f.validated, f.maxDecompressed)
		if err == nil {
			f.recs, err = scanRecords(&rh, data, f.recs[:0])
		}
		if err != nil {
			return dst, fmt.Errorf("segment: clean: marker at %d: %w", h.BaseOffset, err)
		}
		f.kept = f.kept[:0]
		for i := range f.recs {
			f.kept = append(f.kept, int32(i))
		}
		f.stats.RecordsKept += int64(h.RecordCount)
		f.stats.MarkerHorizonsSet++
		f.rewrote = true
		return f.appendRewritten(dst, h, f.recs, data, true, f.newHorizon())
	}
	f.stats.RecordsKept += int64(h.RecordCount)
	return append(dst, b...), nil
}

// abortedSet answers whether a producer's batch at an offset belongs to an
// aborted transaction.
type abortedSet map[int64][]AbortedTxn // by producer, ascending first offset

func newAbortedSet(txns []AbortedTxn) abortedSet {
	if len(txns) == 0 {
		return nil
	}
	s := abortedSet{}
	for _, t := range txns {
		s[t.ProducerID] = append(s[t.ProducerID], t)
	}
	for _, l := range s {
		sort.Slice(l, func(i, j int) bool { return l[i].FirstOffset < l[j].FirstOffset })
	}
	return s
}

// contains reports whether offset of producer pid lies in one of its
// aborted transactions [first offset, marker).
func (s abortedSet) contains(pid, offset int64) bool {
	l := s[pid]
	i := sort.Search(len(l), func(i int) bool { return l[i].FirstOffset > offset }) - 1
	return i >= 0 && offset < l[i].LastOffset
}

// filterAborted handles a transactional data batch of an aborted
// transaction below the map's end: it keeps none of its records (an empty
// batch when it is its producer's last, else nothing) and reports true.
// Any other batch is left to filter (false).
func (f *batchFilter) filterAborted(dst, b []byte, h Header) ([]byte, bool) {
	if !h.Transactional() || h.Control() || h.BaseOffset >= f.end || !f.aborted.contains(h.ProducerID, h.BaseOffset) {
		return dst, false
	}
	f.stats.AbortedRecordsDropped += int64(h.RecordCount)
	if f.lastOfProducer[h.ProducerID] != h.LastOffset() {
		return dst, true
	}
	f.stats.EmptyBatchesKept++
	if h.RecordCount == 0 {
		return append(dst, b...), true
	}
	f.rewrote = true
	return appendEmptyBatch(dst, h), true
}
