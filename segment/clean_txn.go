package segment

import "sort"

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
// Markers (control batches) are kept: Kafka removes a marker once the
// transaction's data is gone and delete.retention.ms has passed; Strata
// keeps them, which costs one small batch per transaction and keeps the
// aborted-transaction index consistent with the log.

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
