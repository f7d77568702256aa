package tiering

import (
	"context"
	"fmt"
	"sort"

	"github.com/stratastream/strata/segment"
)

// A remote segment's .txnindex object holds the transactions aborted by
// markers inside it, in segment.TxnIndex's file format, uploaded with the
// segment by the archiver (ArchiverConfig.TxnIndex). read_committed
// fetches served from the bucket get their aborted transactions from
// these objects (RemoteReader.AbortedTxns); the reader caches them with
// the segments' offset indexes.

// segmentTxnIndex returns the aborted transactions of seg (none when it
// has no .txnindex object), those with a marker at or past its NextOffset
// (a segment cut by an unclean election) left out.
func (r *RemoteReader) segmentTxnIndex(ctx context.Context, prefix string, seg *RemoteSegment) ([]segment.AbortedTxn, error) {
	if !seg.HasTxnIndex {
		return nil, nil
	}
	key := prefix + seg.ObjectName() + SuffixTxnIndex
	base, next := seg.BaseOffset, seg.NextOffset
	v, err := r.indexes.get(ctx, indexCacheKey(prefix, seg, SuffixTxnIndex), func(ctx context.Context) (any, int64, error) {
		raw, err := r.readObject(ctx, key)
		if err != nil {
			return nil, 0, err
		}
		// A segment sliced on upload starts above the segment base its
		// entries were filed under: check against 0, bound by next.
		ents, _, derr := segment.DecodeTxnIndex(raw, 0)
		if derr != nil {
			return nil, 0, fmt.Errorf("tiering: %s: %w", key, derr)
		}
		out := ents[:0]
		for _, e := range ents {
			if e.LastOffset >= base && e.LastOffset < next {
				out = append(out, e)
			}
		}
		return out, int64(len(out))*segment.TxnIndexEntrySize + 64, nil
	})
	if err != nil {
		return nil, fmt.Errorf("tiering: transaction index of %s: %w", key, err)
	}
	return v.([]segment.AbortedTxn), nil
}

// AbortedTxns returns the aborted transactions of m's segments that
// overlap [from, upTo): marker at or after from, first offset below upTo,
// in marker order, as segment.TxnIndex.CollectAborted does locally. It
// reads the segments from the one holding from on, and stops at the first
// entry whose last stable offset reaches upTo (no transaction begun
// before upTo is still open after it: Kafka's isComplete). complete
// reports that stop; when false, the caller goes on with the local index.
func (r *RemoteReader) AbortedTxns(ctx context.Context, m *Manifest, from, upTo int64) (out []segment.AbortedTxn, complete bool, err error) {
	prefix := m.Prefix()
	i := sort.Search(len(m.Segments), func(i int) bool { return m.Segments[i].NextOffset > from })
	for ; i < len(m.Segments); i++ {
		ents, err := r.segmentTxnIndex(ctx, prefix, &m.Segments[i])
		if err != nil {
			return nil, false, err
		}
		for _, e := range ents {
			if e.LastOffset >= from && e.FirstOffset < upTo {
				out = append(out, e)
			}
			if e.LastOffset >= from && e.LastStableOffset >= upTo {
				return out, true, nil
			}
		}
	}
	return out, false, nil
}
