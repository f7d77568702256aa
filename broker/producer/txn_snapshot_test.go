package producer

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// txnState is a state with an open transaction (producer 1), a completed
// one whose marker is not known replicated (producer 2), a producer known
// only by a marker (3) and a sequence-less transactional producer (4).
func txnState(t *testing.T) *StateManager {
	t.Helper()
	s := NewStateManager(0)
	off := int64(0)
	data := func(pid int64, seq, n int32) {
		h := txnHdr(pid, 0, seq, n)
		h.MaxTimestamp = 100 + off
		s.Update(h, off)
		off += int64(n)
	}
	marker := func(pid int64, commit bool, coordEpoch int32) {
		h := segment.Header{ProducerID: pid, ProducerEpoch: 0, BaseSequence: -1, Attributes: 0x30, MaxTimestamp: 100 + off}
		typ := segment.ControlAbort
		if commit {
			typ = segment.ControlCommit
		}
		s.Update(h, off)
		s.ApplyMarker(h, segment.ControlRecord{Type: typ, CoordinatorEpoch: coordEpoch}, off)
		off++
	}
	data(2, 0, 3)
	data(1, 0, 2)
	marker(2, false, 4)
	marker(3, true, 7)
	data(4, -1, 2)
	return s
}

func TestTxnSnapshotRoundTrip(t *testing.T) {
	s := txnState(t)
	if got := s.LastStableOffset(5); got != 0 {
		t.Fatalf("LSO %d, want 0 (producer 2's aborted transaction not replicated)", got)
	}
	data, err := s.EncodeSnapshot(s.End())
	if err != nil {
		t.Fatal(err)
	}
	off, ps, un, err := decodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ps, s.mu.producers) || !reflect.DeepEqual(un, s.mu.unreplicated) {
		t.Fatalf("decoded %+v %+v, want %+v %+v", ps, un, s.mu.producers, s.mu.unreplicated)
	}
	if again := encodeSnapshot(off, ps, un); !bytes.Equal(again, data) {
		t.Fatal("re-encoding differs")
	}
	got := NewStateManager(0)
	got.setProducersLocked(ps)
	got.mu.unreplicated = un
	got.noteUnstableLocked()
	for _, hw := range []int64{0, 3, 5, 6, 7, 9} {
		if a, b := got.LastStableOffset(hw), txnState(t).LastStableOffset(hw); a != b {
			t.Fatalf("LSO(%d) after the round trip %d, live %d", hw, a, b)
		}
	}
	want := map[int64]ProducerInfo{
		1: {ProducerID: 1, Epoch: 0, LastSequence: 1, LastTimestamp: 103, CoordinatorEpoch: -1, TxnStartOffset: 3},
		2: {ProducerID: 2, Epoch: 0, LastSequence: 2, LastTimestamp: 105, CoordinatorEpoch: 4, TxnStartOffset: -1},
		3: {ProducerID: 3, Epoch: 0, LastSequence: -1, LastTimestamp: 106, CoordinatorEpoch: 7, TxnStartOffset: -1},
		4: {ProducerID: 4, Epoch: 0, LastSequence: -1, LastTimestamp: 107, CoordinatorEpoch: -1, TxnStartOffset: 7},
	}
	for _, pi := range got.Describe() {
		if pi != want[pi.ProducerID] {
			t.Errorf("producer %d: %+v, want %+v", pi.ProducerID, pi, want[pi.ProducerID])
		}
	}
	// The marker fencing rules.
	if code := ErrorCode(got.CheckMarker(3, 0, 6, false)); code != kerr.TransactionCoordinatorFenced.Code {
		t.Errorf("older coordinator epoch: code %d", code)
	}
	if code := ErrorCode(got.CheckMarker(3, 0, 7, false)); code != 0 {
		t.Errorf("same coordinator epoch: code %d", code)
	}
	// Transaction version 2: the marker's epoch must be above that of
	// an open transaction (producer 4's, at epoch 0); with none open the
	// producer's epoch is enough.
	if code := ErrorCode(got.CheckMarker(4, 0, 0, true)); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("version 2 marker at the open transaction's epoch: code %d", code)
	}
	if code := ErrorCode(got.CheckMarker(4, 1, 0, true)); code != 0 {
		t.Errorf("version 2 marker at the bumped epoch: code %d", code)
	}
	if code := ErrorCode(got.CheckMarker(3, 0, 7, true)); code != 0 {
		t.Errorf("version 2 marker with no transaction open: code %d", code)
	}
	got.Update(hdr(5, 3, 0, 1), 8)
	if code := ErrorCode(got.CheckMarker(5, 2, 0, false)); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("older producer epoch: code %d", code)
	}
}

// TestSnapshotVersion1Read: a snapshot of the previous format (no
// transaction fields) still loads.
func TestSnapshotVersion1Read(t *testing.T) {
	s := sampleState()
	// Version 1: header, then per producer id, epoch, n and the batches.
	var b []byte
	b = append(b, snapMagic...)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(s.End()))
	ids := s.ProducerIDs()
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, pid := range ids {
		e := s.mu.producers[pid]
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = append(b, byte(e.n))
		for _, m := range e.batches[:e.n] {
			b = binary.BigEndian.AppendUint32(b, uint32(m.FirstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(m.LastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(m.FirstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.LastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.Timestamp))
		}
	}
	binary.BigEndian.PutUint32(b[6:], crc32.Checksum(b[snapCRCStart:], castagnoli))
	_, ps, un, err := decodeSnapshot(b)
	if err != nil || un != nil {
		t.Fatalf("version 1: %v %v", un, err)
	}
	if !reflect.DeepEqual(ps, s.mu.producers) {
		t.Fatalf("version 1 decoded %+v, want %+v", ps, s.mu.producers)
	}
}
