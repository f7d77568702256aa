package segment

import "fmt"

// ReplaySource is a log as a coordinator replays it at load: its offsets
// and copies of its batches (Log has these methods).
type ReplaySource interface {
	ReadCopy(offset int64, maxBytes int, maxOffset int64) ([]byte, error)
	LogStartOffset() int64
	LogEndOffset() int64
}

// Replay reads src from its start offset to its end offset, readBytes at
// a time (the gaps of a compacted log are skipped), and calls fn for
// every record of every data batch, in offset order; control batches are
// skipped. It returns the bytes read. An error of a read, of a batch that
// does not decode, or of fn ends it.
func Replay(src ReplaySource, readBytes int, fn func(Record) error) (int64, error) {
	var n int64
	off, end := src.LogStartOffset(), src.LogEndOffset()
	for off < end {
		buf, err := src.ReadCopy(off, readBytes, end)
		if err != nil {
			return n, fmt.Errorf("read at offset %d: %w", off, err)
		}
		if len(buf) == 0 {
			break // a gap up to the log end
		}
		n += int64(len(buf))
		next := off
		err = SplitBatches(buf, func(h Header, batch []byte) error {
			if h.NextOffset() <= next {
				return nil
			}
			if !h.Control() {
				it, err := NewRecordIter(batch, DefaultMaxDecompressed)
				if err != nil {
					return err
				}
				for {
					rec, ok, err := it.Next()
					if err != nil {
						return err
					}
					if !ok {
						break
					}
					if rec.Offset < next {
						continue
					}
					if err := fn(rec); err != nil {
						return err
					}
				}
			}
			next = h.NextOffset()
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("batch after offset %d: %w", next, err)
		}
		if next == off {
			return n, fmt.Errorf("read at offset %d returned no batch before the log end %d", off, end)
		}
		off = next
	}
	return n, nil
}
