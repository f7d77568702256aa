package producer

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/atomicfile"
)

// Snapshot format constants (see the package documentation). They are the
// on-disk format: never change them; add a version instead.
const (
	snapMagic      = "STPS"
	snapVersion1   = 1
	snapVersion    = 2
	snapHeaderSize = 22 // magic 4, version 2, crc 4, offset 8, count 4
	snapCRCStart   = 10 // the CRC covers [snapCRCStart, end)
	snapEntryHead1 = 11 // v1: producer id 8, epoch 2, batch count 1
	snapEntryHead  = 39 // v2: v1's, then coordinator epoch 4, txn first offset 8, last offset 8, last timestamp 8
	snapBatchSize  = 32 // first seq 4, last seq 4, first offset 8, last offset 8, timestamp 8
	snapTxnSize    = 33 // producer id 8, first offset 8, last offset 8, aborted 1, last stable offset 8

	// SnapshotSuffix ends the name of a snapshot file (segment names the
	// files of a partition directory).
	SnapshotSuffix = segment.SnapshotSuffix
	// SnapshotsKept is how many snapshots pruning leaves in a directory.
	SnapshotsKept = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SnapshotFileName returns the name of the snapshot at offset:
// segment.SnapshotFileName, the offset in 20 digits, then SnapshotSuffix.
func SnapshotFileName(offset int64) string { return segment.SnapshotFileName(offset) }

// EncodeSnapshot captures the state as a snapshot at offset, which must be
// at or above every batch applied so far (the log end offset, read under
// the partition's append lock, is right). Encoding takes the state's lock
// but does no I/O, so a server can capture under its append lock and write
// after releasing it. ErrSnapshotOffset means batches at or above offset
// were already applied.
func (s *StateManager) EncodeSnapshot(offset int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if offset < s.mu.end {
		return nil, fmt.Errorf("%w: offset %d, state reflects batches up to %d", ErrSnapshotOffset, offset, s.mu.end)
	}
	return encodeSnapshot(offset, s.mu.producers, s.mu.unreplicated), nil
}

// Snapshot captures the state at offset and writes it to dir, as
// EncodeSnapshot and WriteSnapshot do.
func (s *StateManager) Snapshot(dir string, offset int64) error {
	data, err := s.EncodeSnapshot(offset)
	if err != nil {
		return err
	}
	return WriteSnapshot(dir, offset, data)
}

// WriteSnapshot stores data, from EncodeSnapshot(offset), as
// SnapshotFileName(offset) in dir (created if missing), replaced atomically
// and durable when it returns nil. It then deletes all but the newest
// SnapshotsKept snapshots. It touches no StateManager. Calls for one
// directory must not overlap (they share temporary file names); one
// partition's snapshots are written by one goroutine at a time.
func WriteSnapshot(dir string, offset int64, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("producer: snapshot directory: %w", err)
	}
	if err := files.WriteFile(filepath.Join(dir, SnapshotFileName(offset)), data, 0o644); err != nil {
		return fmt.Errorf("producer: write snapshot %d: %w", offset, err)
	}
	_, err := pruneSnapshots(dir, SnapshotsKept)
	return err
}

func encodeSnapshot(offset int64, producers map[int64]*entry, unreplicated []CompletedTxn) []byte {
	ids := make([]int64, 0, len(producers))
	size := snapHeaderSize
	for pid, e := range producers {
		ids = append(ids, pid)
		size += snapEntryHead + e.n*snapBatchSize
	}
	size += 4 + len(unreplicated)*snapTxnSize
	slices.Sort(ids)
	b := make([]byte, 0, size)
	b = append(b, snapMagic...)
	b = binary.BigEndian.AppendUint16(b, snapVersion)
	b = binary.BigEndian.AppendUint32(b, 0) // CRC, filled in below
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, pid := range ids {
		e := producers[pid]
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = append(b, byte(e.n))
		b = binary.BigEndian.AppendUint32(b, uint32(e.coordEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.txnFirst))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastTs))
		for _, m := range e.batches[:e.n] {
			b = binary.BigEndian.AppendUint32(b, uint32(m.FirstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(m.LastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(m.FirstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.LastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.Timestamp))
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(unreplicated)))
	for _, c := range unreplicated {
		b = binary.BigEndian.AppendUint64(b, uint64(c.ProducerID))
		b = binary.BigEndian.AppendUint64(b, uint64(c.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(c.LastOffset))
		aborted := byte(0)
		if c.Aborted {
			aborted = 1
		}
		b = append(b, aborted)
		b = binary.BigEndian.AppendUint64(b, uint64(c.LastStableOffset))
	}
	binary.BigEndian.PutUint32(b[6:], crc32.Checksum(b[snapCRCStart:], castagnoli))
	return b
}

// decodeSnapshot parses a snapshot, checking everything the package
// documentation lists. Errors wrap ErrCorruptSnapshot.
func decodeSnapshot(b []byte) (offset int64, producers map[int64]*entry, unreplicated []CompletedTxn, err error) {
	corrupt := func(format string, args ...any) (int64, map[int64]*entry, []CompletedTxn, error) {
		return 0, nil, nil, fmt.Errorf("%w: %s", ErrCorruptSnapshot, fmt.Sprintf(format, args...))
	}
	if len(b) < snapHeaderSize {
		return corrupt("%d bytes, header needs %d", len(b), snapHeaderSize)
	}
	if string(b[:4]) != snapMagic {
		return corrupt("bad magic %q", b[:4])
	}
	version := binary.BigEndian.Uint16(b[4:])
	if version != snapVersion && version != snapVersion1 {
		return 0, nil, nil, fmt.Errorf("%w %d", ErrSnapshotVersion, version)
	}
	head := snapEntryHead
	if version == snapVersion1 {
		head = snapEntryHead1
	}
	if stored, got := binary.BigEndian.Uint32(b[6:]), crc32.Checksum(b[snapCRCStart:], castagnoli); stored != got {
		return corrupt("crc: stored %08x, computed %08x", stored, got)
	}
	offset = int64(binary.BigEndian.Uint64(b[10:]))
	count := binary.BigEndian.Uint32(b[18:])
	if offset < 0 {
		return corrupt("offset %d", offset)
	}
	rest := b[snapHeaderSize:]
	if uint64(count) > uint64(len(rest)/head) {
		return corrupt("%d producers cannot fit in %d bytes", count, len(rest))
	}
	producers = make(map[int64]*entry, count)
	prevPID := int64(-1)
	for i := range count {
		if len(rest) < head {
			return corrupt("producer %d: truncated", i)
		}
		pid := int64(binary.BigEndian.Uint64(rest))
		e := &entry{epoch: int16(binary.BigEndian.Uint16(rest[8:])), n: int(rest[10]), coordEpoch: -1, txnFirst: -1}
		if version >= 2 {
			e.coordEpoch = int32(binary.BigEndian.Uint32(rest[11:]))
			e.txnFirst = int64(binary.BigEndian.Uint64(rest[15:]))
			e.lastOffset = int64(binary.BigEndian.Uint64(rest[23:]))
			e.lastTs = int64(binary.BigEndian.Uint64(rest[31:]))
		}
		rest = rest[head:]
		minBatches := 1
		if version >= 2 {
			minBatches = 0
		}
		switch {
		case pid <= prevPID:
			return corrupt("producer id %d after %d", pid, prevPID)
		case e.epoch < 0:
			return corrupt("producer %d: epoch %d", pid, e.epoch)
		case e.coordEpoch < -1 || e.txnFirst < -1 || e.txnFirst >= offset:
			return corrupt("producer %d: coordinator epoch %d, transaction from %d, snapshot at %d", pid, e.coordEpoch, e.txnFirst, offset)
		case e.n < minBatches || e.n > CachedBatches:
			return corrupt("producer %d: %d batches", pid, e.n)
		case len(rest) < e.n*snapBatchSize:
			return corrupt("producer %d: truncated batches", pid)
		}
		prevPID = pid
		prevLast := int64(-1)
		for j := range e.n {
			m := BatchMeta{
				FirstSeq:    int32(binary.BigEndian.Uint32(rest)),
				LastSeq:     int32(binary.BigEndian.Uint32(rest[4:])),
				FirstOffset: int64(binary.BigEndian.Uint64(rest[8:])),
				LastOffset:  int64(binary.BigEndian.Uint64(rest[16:])),
				Timestamp:   int64(binary.BigEndian.Uint64(rest[24:])),
			}
			rest = rest[snapBatchSize:]
			span := m.LastOffset - m.FirstOffset
			switch {
			case m.FirstOffset <= prevLast || span < 0 || span > math.MaxInt32 || m.LastOffset >= offset:
				return corrupt("producer %d batch %d: offsets %d..%d after %d, snapshot at %d", pid, j, m.FirstOffset, m.LastOffset, prevLast, offset)
			case m.FirstSeq < 0 || m.LastSeq != incrementSequence(m.FirstSeq, int32(span)):
				return corrupt("producer %d batch %d: sequences %d..%d for %d records", pid, j, m.FirstSeq, m.LastSeq, span+1)
			}
			prevLast = m.LastOffset
			e.batches[j] = m
		}
		if version == snapVersion1 {
			e.lastOffset, e.lastTs = e.last().LastOffset, e.last().Timestamp
		} else if e.lastOffset < max(prevLast, 0) || e.lastOffset >= offset || (e.txnFirst > e.lastOffset) {
			return corrupt("producer %d: last offset %d, batches to %d, transaction from %d, snapshot at %d", pid, e.lastOffset, prevLast, e.txnFirst, offset)
		}
		producers[pid] = e
	}
	if version >= 2 {
		if len(rest) < 4 {
			return corrupt("transactions: truncated")
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n)*snapTxnSize != uint64(len(rest)) {
			return corrupt("%d transactions in %d bytes", n, len(rest))
		}
		prevLast := int64(-1)
		for range n {
			c := CompletedTxn{
				ProducerID:       int64(binary.BigEndian.Uint64(rest)),
				FirstOffset:      int64(binary.BigEndian.Uint64(rest[8:])),
				LastOffset:       int64(binary.BigEndian.Uint64(rest[16:])),
				Aborted:          rest[24] == 1,
				LastStableOffset: int64(binary.BigEndian.Uint64(rest[25:])),
			}
			if c.ProducerID < 0 || c.FirstOffset < 0 || c.FirstOffset > c.LastOffset || c.LastOffset <= prevLast || c.LastOffset >= offset || rest[24] > 1 || c.LastStableOffset < 0 {
				return corrupt("transaction %+v after %d, snapshot at %d", c, prevLast, offset)
			}
			prevLast = c.LastOffset
			unreplicated = append(unreplicated, c)
			rest = rest[snapTxnSize:]
		}
	}
	if len(rest) != 0 {
		return corrupt("%d trailing bytes", len(rest))
	}
	return offset, producers, unreplicated, nil
}

// snapshotFile is a snapshot found in a directory.
type snapshotFile struct {
	offset int64
	path   string
}

// listSnapshots returns dir's snapshots, oldest first, and removes leftover
// temporary files of interrupted writes. A missing dir has none.
func listSnapshots(dir string) ([]snapshotFile, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("producer: list snapshots: %w", err)
	}
	var snaps []snapshotFile
	for _, de := range des {
		name := de.Name()
		if strings.HasSuffix(name, SnapshotSuffix+atomicfile.TempSuffix) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("producer: remove leftover %s: %w", name, err)
			}
			continue
		}
		off, ok := segment.ParseSnapshotFileName(name)
		if !ok || de.IsDir() {
			continue
		}
		snaps = append(snaps, snapshotFile{offset: off, path: filepath.Join(dir, name)})
	}
	slices.SortFunc(snaps, func(a, b snapshotFile) int { return cmp.Compare(a.offset, b.offset) })
	return snaps, nil
}

// pruneSnapshots deletes all but the newest keep snapshots in dir and
// returns the paths it deleted.
func pruneSnapshots(dir string, keep int) ([]string, error) {
	snaps, err := listSnapshots(dir)
	if err != nil || len(snaps) <= keep {
		return nil, err
	}
	return removeSnapshots(dir, snaps[:len(snaps)-keep])
}

// removeSnapshots deletes the given snapshots and makes the removal durable.
func removeSnapshots(dir string, snaps []snapshotFile) ([]string, error) {
	var removed []string
	for _, sf := range snaps {
		if err := os.Remove(sf.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("producer: remove snapshot: %w", err)
		}
		removed = append(removed, sf.path)
	}
	if len(removed) > 0 {
		if err := files.SyncDir(dir); err != nil {
			return removed, fmt.Errorf("producer: remove snapshots: %w", err)
		}
	}
	return removed, nil
}
