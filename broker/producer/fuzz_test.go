package producer

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// FuzzDecodeSnapshot checks the snapshot decoder's invariants:
//   - it never panics, whatever the bytes;
//   - what it accepts encodes back to exactly the same bytes (the format
//     has one encoding per state), and every accepted batch lies below the
//     snapshot's offset, so Load can replay from there;
//   - a state loaded from it takes further updates and re-encodes.
//
// Each input is tried as is and with its CRC recomputed, so that mutations
// reach the entry parser instead of stopping at the checksum.
//
// Seeds: testdata/fuzz/FuzzDecodeSnapshot, plus the ones added here.
func FuzzDecodeSnapshot(f *testing.F) {
	empty, _ := NewStateManager(0).EncodeSnapshot(0)
	f.Add(empty)
	f.Add(encodeSnapshot(20, sampleState().mu.producers, nil))
	f.Add([]byte(snapMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
		if len(b) >= snapHeaderSize {
			checkDecode(t, fixCRC(bytes.Clone(b)))
		}
	})
}

func checkDecode(t *testing.T, b []byte) {
	t.Helper()
	off, ps, un, err := decodeSnapshot(b)
	if err != nil {
		if !IsCorrupt(err) {
			t.Fatalf("error %v is not a corruption error", err)
		}
		return
	}
	if again := encodeSnapshot(off, ps, un); binary.BigEndian.Uint16(b[4:]) == snapVersion && !bytes.Equal(again, b) {
		t.Fatalf("accepted snapshot re-encodes differently:\n in  %x\n out %x", b, again)
	}
	for pid, e := range ps {
		if e.lastOffset >= off {
			t.Fatalf("producer %d has a batch at %d, snapshot at %d", pid, e.lastOffset, off)
		}
	}
	if off > math.MaxInt64/2 {
		return // no log gets there; offset arithmetic below would overflow
	}
	s := NewStateManager(off)
	s.setProducersLocked(ps)
	s.Update(hdr(1, 0, 0, 3), off)
	if _, err := s.EncodeSnapshot(off + 3); err != nil {
		t.Fatal(err)
	}
}
