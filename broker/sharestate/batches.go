package sharestate

import (
	"cmp"
	"slices"
)

// combine is cur with upd written over it, as Kafka's
// PersisterStateBatchCombiner: an offset takes the state of the last batch
// of upd that covers it, else its state in cur; offsets below start (when
// start >= 0) are dropped; the result is sorted, without overlaps, and
// neighbouring batches of the same state and count are joined. Batches
// with First > Last are ignored. cur and upd are not modified.
func combine(cur, upd []StateBatch, start int64) []StateBatch {
	out := slices.Clone(cur)
	for _, nb := range upd {
		if nb.First > nb.Last {
			continue
		}
		kept := out[:0:0]
		for _, e := range out {
			if e.Last < nb.First || e.First > nb.Last {
				kept = append(kept, e)
				continue
			}
			if e.First < nb.First {
				l := e
				l.Last = nb.First - 1
				kept = append(kept, l)
			}
			if e.Last > nb.Last {
				r := e
				r.First = nb.Last + 1
				kept = append(kept, r)
			}
		}
		out = append(kept, nb)
	}
	slices.SortFunc(out, func(a, b StateBatch) int { return cmp.Compare(a.First, b.First) })
	merged := out[:0]
	for _, b := range out {
		if start >= 0 {
			if b.Last < start {
				continue
			}
			b.First = max(b.First, start)
		}
		if n := len(merged); n > 0 {
			p := &merged[n-1]
			if p.Last+1 == b.First && p.DeliveryState == b.DeliveryState && p.DeliveryCount == b.DeliveryCount {
				p.Last = b.Last
				continue
			}
		}
		merged = append(merged, b)
	}
	if len(merged) == 0 {
		return nil
	}
	return merged
}
