package segment

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// EpochEntry says that leader epoch Epoch wrote the log from StartOffset on.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// Undefined values returned by EpochCache.EndOffsetFor, as in Kafka.
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// EpochCache maps leader epochs to the offset where each began (Kafka's
// leader-epoch cache, KIP-101). Every change is written to the partition's
// leader-epoch-checkpoint before the method returns. Its methods are safe for
// concurrent use; its lock is a leaf: no other lock is taken while it is
// held.
type EpochCache struct {
	dir    string
	logEnd func() int64 // called without the cache's lock held

	mu struct {
		sync.Mutex
		entries []EpochEntry // epochs and start offsets strictly increasing
	}
}

// newEpochCache loads the cache from dir's checkpoint, if any. A
// checkpoint that does not parse (ErrBadCheckpoint) is rebuilt with
// rebuild and rewritten; rebuilt reports that. Other errors (the file
// cannot be read) are returned.
func newEpochCache(dir string, logEnd func() int64, rebuild func() ([]EpochEntry, error)) (c *EpochCache, rebuilt bool, err error) {
	entries, _, err := ReadLeaderEpochs(dir)
	c = &EpochCache{dir: dir, logEnd: logEnd}
	if errors.Is(err, ErrBadCheckpoint) {
		if entries, err = rebuild(); err != nil {
			return nil, false, err
		}
		c.mu.Lock()
		err = c.replaceLocked(entries)
		c.mu.Unlock()
		return c, true, err
	}
	if err != nil {
		return nil, false, err
	}
	c.mu.entries = entries
	return c, false, nil
}

// epochsFromBatches rebuilds the leader-epoch cache from the log itself:
// every batch carries the leader epoch that wrote it (its partition
// leader epoch), so an epoch begins at the first batch that carries it.
// Batches without an epoch (-1) and epochs lower than one already seen
// (never written by a correct leader) are skipped. Caller is recover,
// before the log is shared; it reads only batch headers.
func (l *Log) epochsFromBatches() ([]EpochEntry, error) {
	var out []EpochEntry
	for _, s := range l.mu.segs {
		r := newHeaderReader(s.f, s.size)
		for pos := int64(0); pos < s.size; {
			h, err := r.at(pos)
			if err != nil {
				r.release()
				return nil, fmt.Errorf("segment: rebuild %s from %s: %w", leaderEpochFile, s.logPath, err)
			}
			if e := h.PartitionLeaderEpoch; e >= 0 && (len(out) == 0 || e > out[len(out)-1].Epoch) {
				out = append(out, EpochEntry{Epoch: e, StartOffset: h.BaseOffset})
			}
			pos += int64(h.Size())
		}
		r.release()
	}
	return out, nil
}

// ReadLeaderEpochs reads the leader-epoch checkpoint of the partition
// directory dir: the epochs that wrote the log and the offsets where each
// began, epochs increasing, offsets never decreasing. ok is false when
// there is none. It only reads, so it may run beside the broker that owns
// dir. ErrBadCheckpoint when the file does not parse.
func ReadLeaderEpochs(dir string) (entries []EpochEntry, ok bool, err error) {
	lines, ok, err := readCheckpointLines(dir, leaderEpochFile)
	if err != nil || !ok {
		return nil, ok, err
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, false, fmt.Errorf("%w: %s: line %q", ErrBadCheckpoint, leaderEpochFile, line)
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 32)
		start, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return nil, false, fmt.Errorf("%w: %s: line %q", ErrBadCheckpoint, leaderEpochFile, line)
		}
		e := EpochEntry{Epoch: int32(epoch), StartOffset: start}
		if n := len(entries); n > 0 {
			if last := entries[n-1]; e.Epoch <= last.Epoch || e.StartOffset < last.StartOffset {
				return nil, false, fmt.Errorf("%w: %s: entry %v after %v", ErrBadCheckpoint, leaderEpochFile, e, last)
			}
		}
		entries = append(entries, e)
	}
	return entries, true, nil
}

// Assign records that epoch begins at startOffset. It is a no-op when epoch
// is already the latest and starts at or before startOffset. Otherwise
// entries with an epoch >= epoch or a start offset >= startOffset are
// replaced, as Kafka does, and the checkpoint is rewritten.
func (c *EpochCache) Assign(epoch int32, startOffset int64) error {
	if epoch < 0 || startOffset < 0 {
		return fmt.Errorf("segment: assign epoch %d at offset %d: negative", epoch, startOffset)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.mu.entries
	if n := len(es); n > 0 && es[n-1].Epoch == epoch && es[n-1].StartOffset <= startOffset {
		return nil
	}
	keep := len(es)
	for keep > 0 && (es[keep-1].Epoch >= epoch || es[keep-1].StartOffset >= startOffset) {
		keep--
	}
	next := append(es[:keep:keep], EpochEntry{Epoch: epoch, StartOffset: startOffset})
	return c.replaceLocked(next)
}

// Latest returns the newest epoch and its start offset; ok is false when the
// cache is empty.
func (c *EpochCache) Latest() (epoch int32, start int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.mu.entries); n > 0 {
		e := c.mu.entries[n-1]
		return e.Epoch, e.StartOffset, true
	}
	return UndefinedEpoch, UndefinedEpochOffset, false
}

// EndOffsetFor answers an OffsetsForLeaderEpoch question (KIP-101, KIP-279):
// the end offset of the requested epoch, which is the start offset of the
// first later epoch, or the log end offset when epoch is the latest. The
// returned epoch is the largest known epoch <= the requested one (or the
// requested one when it precedes every known epoch). Both are undefined (-1)
// when the requested epoch is undefined or newer than every known epoch.
func (c *EpochCache) EndOffsetFor(epoch int32) (int32, int64) {
	leo := c.logEnd()
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.mu.entries
	if epoch == UndefinedEpoch || len(es) == 0 {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if es[len(es)-1].Epoch == epoch {
		return epoch, leo
	}
	// higher is the first entry with a larger epoch.
	higher := 0
	for higher < len(es) && es[higher].Epoch <= epoch {
		higher++
	}
	if higher == len(es) {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if higher == 0 {
		return epoch, es[0].StartOffset
	}
	return es[higher-1].Epoch, es[higher].StartOffset
}

// Entries returns a copy of the cache, oldest epoch first.
func (c *EpochCache) Entries() []EpochEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]EpochEntry(nil), c.mu.entries...)
}

// truncateFromEnd removes the epochs that start at or after endOffset (the
// log was truncated to endOffset).
func (c *EpochCache) truncateFromEnd(endOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.mu.entries
	keep := len(es)
	for keep > 0 && es[keep-1].StartOffset >= endOffset {
		keep--
	}
	if keep == len(es) {
		return nil
	}
	return c.replaceLocked(es[:keep:keep])
}

// truncateFromStart drops epochs that ended before startOffset and moves the
// start of the epoch holding startOffset up to it (the log start moved).
func (c *EpochCache) truncateFromStart(startOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.mu.entries
	// drop is the number of entries wholly before startOffset.
	drop := 0
	for drop < len(es) && es[drop].StartOffset <= startOffset {
		drop++
	}
	if drop == 0 {
		return nil
	}
	// Keep the last dropped one: its epoch covers startOffset.
	kept := es[drop-1]
	if drop == 1 && kept.StartOffset == startOffset {
		return nil
	}
	kept.StartOffset = startOffset
	next := append([]EpochEntry{kept}, es[drop:]...)
	return c.replaceLocked(next)
}

// clear removes every entry.
func (c *EpochCache) clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replaceLocked(nil)
}

// replaceLocked writes entries to the checkpoint, then installs them. The
// cache is unchanged when the write fails.
func (c *EpochCache) replaceLocked(entries []EpochEntry) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	if err := writeFileAtomic(c.dir, leaderEpochFile, []byte(b.String())); err != nil {
		return err
	}
	c.mu.entries = entries
	return nil
}

// relocate points the cache at the log's new directory (Mover.Finish) and
// writes its checkpoint there from memory, so that a change made while
// the directory was copied is not lost.
func (c *EpochCache) relocate(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dir = dir
	return c.replaceLocked(c.mu.entries)
}
