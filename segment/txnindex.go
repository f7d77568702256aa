package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/stratastream/strata/segment/atomicfile"
)

// The aborted-transaction index is Kafka's .txnindex: one file per segment,
// <base>.txnindex beside <base>.log, listing the transactions aborted by a
// marker inside that segment, in the order of their markers. Each entry is
// 34 bytes, big endian, as Kafka's AbortedTxn:
//
//	0         2                 10                18                26               34
//	+---------+-----------------+-----------------+-----------------+----------------+
//	| version |   producer id   |  first offset   |   last offset   | last stable off|
//	+---------+-----------------+-----------------+-----------------+----------------+
//
//	version           0
//	first offset      the transaction's first offset in the partition
//	last offset       the offset of its ABORT marker
//	last stable off   the partition's last stable offset once the marker
//	                  completed it (informational, as in Kafka)
//
// A read_committed fetch gets the entries that overlap what it returns
// (CollectAborted), so the consumer can drop the aborted records.
//
// The index is written by the broker (package broker), which learns of
// aborted transactions from the producer state; TxnIndex holds every entry
// of the partition in memory too (aborts are rare next to records). It is
// not part of the segment files that Log recovers: the broker rebuilds the
// entries of the tail it replays into its producer state at open (see
// broker/producer), after truncating the index to where the replay starts,
// and fsyncs the index before each producer-state snapshot, so everything
// below a snapshot is durable.

// TxnIndexEntrySize is the size of one .txnindex entry.
const TxnIndexEntrySize = 34

// AbortedTxn is one entry of the aborted-transaction index.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// ErrCorruptTxnIndex says a .txnindex entry is invalid.
var ErrCorruptTxnIndex = errors.New("segment: corrupt transaction index")

// EncodeAbortedTxn appends t's 34-byte entry to dst.
func EncodeAbortedTxn(dst []byte, t AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(t.LastStableOffset))
}

// DecodeTxnIndex parses the entries of one .txnindex file of the segment at
// base. It returns the valid entries and how many bytes they take; a torn
// or invalid tail (a crash mid-append) stops the parse there, reported by
// a non-nil error wrapping ErrCorruptTxnIndex alongside the valid prefix.
// Entries must have version 0, producer id >= 0, 0 <= first <= last,
// last >= base and ascending last offsets.
func DecodeTxnIndex(b []byte, base int64) ([]AbortedTxn, int, error) {
	var out []AbortedTxn
	prev := int64(-1)
	pos := 0
	for ; pos+TxnIndexEntrySize <= len(b); pos += TxnIndexEntrySize {
		e := b[pos:]
		t := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(e[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(e[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(e[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(e[26:])),
		}
		if v := binary.BigEndian.Uint16(e); v != 0 || t.ProducerID < 0 || t.FirstOffset < 0 || t.FirstOffset > t.LastOffset || t.LastOffset < base || t.LastOffset <= prev {
			return out, pos, fmt.Errorf("%w: entry %d of segment %d: version %d, %+v", ErrCorruptTxnIndex, pos/TxnIndexEntrySize, base, v, t)
		}
		prev = t.LastOffset
		out = append(out, t)
	}
	if pos != len(b) {
		return out, pos, fmt.Errorf("%w: segment %d: %d trailing bytes", ErrCorruptTxnIndex, base, len(b)-pos)
	}
	return out, pos, nil
}

// TxnIndex is the aborted-transaction index of a partition directory.
// Its methods are safe for concurrent use; the broker appends under its
// partition's append lock.
type TxnIndex struct {
	mu struct {
		sync.Mutex
		dir     func() string
		entries []txnEntry // ascending LastOffset
		dirty   map[int64]bool
		newFile bool
		// failed is the first failed append: what the files hold is
		// then short of the entries, and Sync keeps failing so that no
		// producer snapshot claims them (the replay at the next open
		// rebuilds them).
		failed error
	}
}

type txnEntry struct {
	seg int64
	AbortedTxn
}

// OpenTxnIndex loads the .txnindex files of dir. A file with an invalid
// tail is cut back to its valid prefix (the entries after it are rebuilt
// by the broker's replay when they are above its producer snapshot); the
// cuts are returned as warnings.
func OpenTxnIndex(dir string) (*TxnIndex, []error, error) {
	x := &TxnIndex{}
	x.mu.dir = func() string { return dir }
	x.mu.dirty = map[int64]bool{}
	des, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("segment: txn index: %w", err)
	}
	var bases []int64
	for _, de := range des {
		if base, ok := ParseTxnIndexFileName(de.Name()); ok && !de.IsDir() {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	var warns []error
	prev := int64(-1)
	for _, base := range bases {
		path := filepath.Join(dir, TxnIndexFileName(base))
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("segment: txn index: %w", err)
		}
		ents, _, derr := DecodeTxnIndex(b, base)
		// Entries must also ascend across files.
		keep := 0
		for keep < len(ents) && ents[keep].LastOffset > prev {
			keep++
		}
		if keep < len(ents) && derr == nil {
			derr = fmt.Errorf("%w: segment %d: entry %d not after offset %d", ErrCorruptTxnIndex, base, keep, prev)
		}
		ents = ents[:keep]
		if derr != nil {
			warns = append(warns, derr)
			if err := os.Truncate(path, int64(keep*TxnIndexEntrySize)); err != nil {
				return nil, nil, fmt.Errorf("segment: txn index: cut %s: %w", path, err)
			}
		}
		for _, t := range ents {
			x.mu.entries = append(x.mu.entries, txnEntry{seg: base, AbortedTxn: t})
			prev = t.LastOffset
		}
	}
	return x, warns, nil
}

// Append adds t, aborted by a marker in the segment at segBase, to the
// index. Markers come in offset order: t.LastOffset must be above every
// entry's, and segBase at most t.LastOffset and at least the last entry's
// segment. The entry is written but not fsynced (see Sync).
func (x *TxnIndex) Append(segBase int64, t AbortedTxn) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := len(x.mu.entries); n > 0 {
		if last := x.mu.entries[n-1]; t.LastOffset <= last.LastOffset || segBase < last.seg {
			return fmt.Errorf("segment: txn index: entry at %d (segment %d) after %d (segment %d)", t.LastOffset, segBase, last.LastOffset, last.seg)
		}
	}
	if segBase > t.LastOffset || t.FirstOffset > t.LastOffset || t.FirstOffset < 0 || t.ProducerID < 0 {
		return fmt.Errorf("segment: txn index: invalid entry %+v in segment %d", t, segBase)
	}
	path := filepath.Join(x.mu.dir(), TxnIndexFileName(segBase))
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		err = fmt.Errorf("segment: txn index: %w", err)
		if x.mu.failed == nil {
			x.mu.failed = err
		}
		return err
	}
	_, werr := f.Write(EncodeAbortedTxn(nil, t))
	if err := errors.Join(werr, f.Close()); err != nil {
		err = fmt.Errorf("segment: txn index: append to %s: %w", path, err)
		if x.mu.failed == nil {
			x.mu.failed = err
		}
		return err
	}
	x.mu.entries = append(x.mu.entries, txnEntry{seg: segBase, AbortedTxn: t})
	x.mu.dirty[segBase] = true
	if statErr != nil {
		x.mu.newFile = true
	}
	return nil
}

// Sync makes every entry appended so far durable. After a failed Append
// it fails with that error until the index is reopened.
func (x *TxnIndex) Sync() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.mu.failed != nil {
		return x.mu.failed
	}
	for base := range x.mu.dirty {
		f, err := os.OpenFile(filepath.Join(x.mu.dir(), TxnIndexFileName(base)), os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			delete(x.mu.dirty, base)
			continue
		}
		if err != nil {
			return fmt.Errorf("segment: txn index: %w", err)
		}
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			return fmt.Errorf("segment: txn index: fsync: %w", err)
		}
		delete(x.mu.dirty, base)
	}
	if x.mu.newFile {
		if err := atomicfile.SyncDir(x.mu.dir()); err != nil {
			return fmt.Errorf("segment: txn index: %w", err)
		}
		x.mu.newFile = false
	}
	return nil
}

// TruncateTo removes the entries whose marker is at or above offset, as
// the log is truncated to offset (or replay will rebuild from there).
func (x *TxnIndex) TruncateTo(offset int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.mu.entries), func(i int) bool { return x.mu.entries[i].LastOffset >= offset })
	if i == len(x.mu.entries) {
		return nil
	}
	// The files of the segments from entries[i].seg on keep their entries
	// below offset.
	counts := map[int64]int{}
	for _, e := range x.mu.entries[:i] {
		counts[e.seg]++
	}
	segs := map[int64]bool{}
	for _, e := range x.mu.entries[i:] {
		segs[e.seg] = true
	}
	for seg := range segs {
		path := filepath.Join(x.mu.dir(), TxnIndexFileName(seg))
		var err error
		if counts[seg] == 0 {
			err = os.Remove(path)
		} else {
			err = truncateSync(path, int64(counts[seg])*TxnIndexEntrySize)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("segment: txn index: truncate: %w", err)
		}
	}
	x.mu.entries = x.mu.entries[:i]
	return atomicfile.SyncDir(x.mu.dir())
}

// truncateSync cuts the file at path to size bytes, never lengthening it
// (after a failed Append or Remove it may hold fewer entries than the
// memory), and fsyncs it.
func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() > size {
		err = f.Truncate(size)
	}
	return errors.Join(err, f.Sync(), f.Close())
}

// DropSegmentsBelow deletes the index files of the segments whose base is
// below base (deleted by retention, or replaced by a log that starts over)
// and forgets their entries.
func (x *TxnIndex) DropSegmentsBelow(base int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	des, err := os.ReadDir(x.mu.dir())
	if err != nil {
		return fmt.Errorf("segment: txn index: %w", err)
	}
	removed := false
	for _, de := range des {
		if b, ok := ParseTxnIndexFileName(de.Name()); ok && b < base {
			if err := os.Remove(filepath.Join(x.mu.dir(), de.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("segment: txn index: %w", err)
			}
			delete(x.mu.dirty, b)
			removed = true
		}
	}
	x.mu.entries = slices.DeleteFunc(x.mu.entries, func(e txnEntry) bool { return e.seg < base })
	if removed {
		return atomicfile.SyncDir(x.mu.dir())
	}
	return nil
}

// Remove deletes the entries of txns (matched by producer id and marker
// offset; those not in the index are ignored): a cleaning found their
// transactions' data gone (CleanResult.AbortedTxnsDone). Each file that
// held one is replaced atomically by its remaining entries, or deleted
// when none remain, and the directory fsynced, so a crash leaves either
// the old file or the new one; the entries leave the memory (Entries,
// CollectAborted) only once that is durable. After a failed Append it
// fails as Sync does, and a failed Remove fails Sync and later Removes
// until the index is reopened.
func (x *TxnIndex) Remove(txns []AbortedTxn) error {
	if len(txns) == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.mu.failed != nil {
		return x.mu.failed
	}
	gone := make(map[[2]int64]bool, len(txns))
	for _, t := range txns {
		gone[[2]int64{t.ProducerID, t.LastOffset}] = true
	}
	segs := map[int64]bool{}
	for _, e := range x.mu.entries {
		if gone[[2]int64{e.ProducerID, e.LastOffset}] {
			segs[e.seg] = true
		}
	}
	if len(segs) == 0 {
		return nil
	}
	kept := slices.DeleteFunc(slices.Clone(x.mu.entries), func(e txnEntry) bool {
		return gone[[2]int64{e.ProducerID, e.LastOffset}]
	})
	removed := false
	for seg := range segs {
		var b []byte
		for _, e := range kept {
			if e.seg == seg {
				b = EncodeAbortedTxn(b, e.AbortedTxn)
			}
		}
		path := filepath.Join(x.mu.dir(), TxnIndexFileName(seg))
		var err error
		if len(b) == 0 {
			if err = os.Remove(path); errors.Is(err, os.ErrNotExist) {
				err = nil
			}
			removed = true
		} else {
			err = atomicfile.WriteFile(path, b, 0o644)
		}
		if err != nil {
			return x.removeFailedLocked(fmt.Errorf("segment: txn index: remove entries of segment %d: %w", seg, err))
		}
		delete(x.mu.dirty, seg) // rewritten and fsynced, or gone
	}
	if removed {
		if err := atomicfile.SyncDir(x.mu.dir()); err != nil {
			return x.removeFailedLocked(fmt.Errorf("segment: txn index: %w", err))
		}
	}
	// Only now, every change durable, do the entries leave the memory
	// the cleaner is given: an entry still listed keeps its marker.
	x.mu.entries = kept
	return nil
}

// removeFailedLocked records a failed Remove: the files may then hold
// fewer entries than the memory (safe for readers: those transactions'
// data is gone), but TruncateTo's sizes would be wrong, so the index
// fails as after a failed Append until it is reopened.
func (x *TxnIndex) removeFailedLocked(err error) error {
	if x.mu.failed == nil {
		x.mu.failed = err
	}
	return err
}

// CollectAborted returns the aborted transactions that overlap [from,
// upTo): those whose marker is at or after from and whose first offset is
// below upTo (Kafka's collectAbortedTransactions), in marker order.
func (x *TxnIndex) CollectAborted(from, upTo int64) []AbortedTxn {
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.mu.entries), func(i int) bool { return x.mu.entries[i].LastOffset >= from })
	var out []AbortedTxn
	for _, e := range x.mu.entries[i:] {
		if e.FirstOffset < upTo {
			out = append(out, e.AbortedTxn)
		}
	}
	return out
}

// EncodeRange returns the encoded entries (a .txnindex file's content)
// whose marker is in [from, to), nil when there are none: a segment's
// entries for the archiver, whichever file they are filed in (a cleaned
// segment replaces several).
func (x *TxnIndex) EncodeRange(from, to int64) []byte {
	x.mu.Lock()
	defer x.mu.Unlock()
	var b []byte
	i := sort.Search(len(x.mu.entries), func(i int) bool { return x.mu.entries[i].LastOffset >= from })
	for _, e := range x.mu.entries[i:] {
		if e.LastOffset >= to {
			break
		}
		b = EncodeAbortedTxn(b, e.AbortedTxn)
	}
	return b
}

// Entries returns every entry, in marker order.
func (x *TxnIndex) Entries() []AbortedTxn {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]AbortedTxn, len(x.mu.entries))
	for i, e := range x.mu.entries {
		out[i] = e.AbortedTxn
	}
	return out
}

// FollowDir makes the index find its directory with dir from now on (a
// partition's directory changes when it moves between log directories).
func (x *TxnIndex) FollowDir(dir func() string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.mu.dir = dir
}
