package producer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// sampleState is a state with three producers, one of them with more than
// five batches and one that wrapped its sequence.
func sampleState() *StateManager {
	s := NewStateManager(0)
	off := int64(0)
	put := func(pid int64, epoch int16, seq, n int32, ts int64) {
		h := hdr(pid, epoch, seq, n)
		h.MaxTimestamp = ts
		s.Update(h, off)
		off += int64(n)
	}
	for i := range 7 {
		put(10, 3, int32(i*2), 2, int64(1000+i))
	}
	put(4, 0, math.MaxInt32-1, 4, -1)
	put(99, 7, 0, 1, 5000)
	return s
}

// fixCRC recomputes a snapshot's CRC after a test changed its bytes.
func fixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[6:], crc32.Checksum(b[snapCRCStart:], castagnoli))
	return b
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := sampleState()
	data, err := s.EncodeSnapshot(s.End())
	if err != nil {
		t.Fatal(err)
	}
	off, ps, un, err := decodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if off != s.End() {
		t.Errorf("offset: got %d, want %d", off, s.End())
	}
	if !reflect.DeepEqual(ps, s.mu.producers) {
		t.Errorf("decoded state differs:\ngot  %+v\nwant %+v", ps, s.mu.producers)
	}
	if again := encodeSnapshot(off, ps, un); !bytes.Equal(again, data) {
		t.Errorf("re-encoding differs")
	}
	// Empty state.
	empty, _ := NewStateManager(0).EncodeSnapshot(0)
	if _, ps, _, err := decodeSnapshot(empty); err != nil || len(ps) != 0 {
		t.Errorf("empty: got %v, %v", ps, err)
	}
}

func TestEncodeSnapshotOffset(t *testing.T) {
	s := sampleState()
	if _, err := s.EncodeSnapshot(s.End() - 1); !errors.Is(err, ErrSnapshotOffset) {
		t.Errorf("below end: got %v, want ErrSnapshotOffset", err)
	}
	if _, err := s.EncodeSnapshot(s.End() + 100); err != nil {
		t.Errorf("above end: got %v, want nil", err)
	}
}

func TestDecodeSnapshotCorrupt(t *testing.T) {
	good, err := sampleState().EncodeSnapshot(20)
	if err != nil {
		t.Fatal(err)
	}
	// Layout of sampleState at 20: producer 4 (1 batch), 10 (5), 99 (1).
	const p0 = snapHeaderSize          // producer 4
	const p1 = p0 + snapEntryHead + 32 // producer 10
	edit := func(f func(b []byte) []byte) []byte {
		return f(bytes.Clone(good))
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"short header", good[:snapHeaderSize-1]},
		{"truncated entry", good[:len(good)-1]},
		{"trailing byte", fixCRC(append(bytes.Clone(good), 0))},
		{"bad magic", edit(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"version 3", edit(func(b []byte) []byte { b[5] = 3; return fixCRC(b) })},
		{"crc", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b })},
		{"count too large", edit(func(b []byte) []byte { binary.BigEndian.PutUint32(b[18:], math.MaxUint32); return fixCRC(b) })},
		{"count too small", edit(func(b []byte) []byte { binary.BigEndian.PutUint32(b[18:], 2); return fixCRC(b) })},
		{"negative offset", edit(func(b []byte) []byte { binary.BigEndian.PutUint64(b[10:], math.MaxUint64); return fixCRC(b) })},
		{"offset below batches", edit(func(b []byte) []byte { binary.BigEndian.PutUint64(b[10:], 5); return fixCRC(b) })},
		{"ids not ascending", edit(func(b []byte) []byte { binary.BigEndian.PutUint64(b[p1:], 4); return fixCRC(b) })},
		{"negative id", edit(func(b []byte) []byte { binary.BigEndian.PutUint64(b[p0:], math.MaxUint64); return fixCRC(b) })},
		{"negative epoch", edit(func(b []byte) []byte { binary.BigEndian.PutUint16(b[p0+8:], 0xffff); return fixCRC(b) })},
		{"last offset beyond snapshot", edit(func(b []byte) []byte { binary.BigEndian.PutUint64(b[p0+23:], 20); return fixCRC(b) })},
		{"transaction beyond snapshot", edit(func(b []byte) []byte { binary.BigEndian.PutUint64(b[p0+15:], 20); return fixCRC(b) })},
		{"six batches", edit(func(b []byte) []byte { b[p1+10] = 6; return fixCRC(b) })},
		{"last seq mismatch", edit(func(b []byte) []byte { b[p0+snapEntryHead+7]++; return fixCRC(b) })},
		{"negative first seq", edit(func(b []byte) []byte { b[p1+snapEntryHead] = 0x80; return fixCRC(b) })},
		{"offsets overlap", edit(func(b []byte) []byte {
			// second batch of producer 10 starts at the first's first offset
			first := b[p1+snapEntryHead+8 : p1+snapEntryHead+16]
			copy(b[p1+snapEntryHead+32+8:], first)
			return fixCRC(b)
		})},
	}
	for i, tt := range tests {
		_, _, _, err := decodeSnapshot(tt.data)
		if !IsCorrupt(err) {
			t.Errorf("#%d %s: got %v, want a corruption error", i, tt.name, err)
		}
	}
	if _, _, _, err := decodeSnapshot(good); err != nil {
		t.Fatalf("the unedited snapshot: %v", err)
	}
}

func TestWriteSnapshotPrunes(t *testing.T) {
	dir := t.TempDir()
	s := sampleState()
	for _, off := range []int64{20, 30, 40, 50} {
		if err := s.Snapshot(dir, off); err != nil {
			t.Fatal(err)
		}
	}
	// A leftover of an interrupted write and an unrelated file.
	if err := os.WriteFile(filepath.Join(dir, SnapshotFileName(60)+".tmp"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	snaps, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, sf := range snaps {
		got = append(got, sf.offset)
	}
	if want := []int64{40, 50}; !reflect.DeepEqual(got, want) {
		t.Errorf("snapshots: got %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, SnapshotFileName(60)+".tmp")); !os.IsNotExist(err) {
		t.Errorf("leftover temp file: got %v, want removed", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000000.log")); err != nil {
		t.Errorf("unrelated file: %v", err)
	}
	if name := SnapshotFileName(50); name != "00000000000000000050.snapshot" {
		t.Errorf("SnapshotFileName(50): got %q", name)
	}
}
