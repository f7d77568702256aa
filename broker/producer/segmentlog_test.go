package producer

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stratastream/strata/segment"
)

// openLog opens a segment log with small segments, closed at cleanup.
func openLog(t *testing.T, dir string) *segment.Log {
	t.Helper()
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = 2048 // many segments
	l, err := segment.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func readerOf(l *segment.Log) ReadFunc {
	end := l.LogEndOffset()
	return func(from int64) ([]byte, error) { return l.ReadCopy(from, 4096, end) }
}

// TestRebuildFromSegmentLog runs the server's append path against a real
// segment.Log, with snapshots kept beside the segment files as Kafka keeps
// them, and rebuilds the state after reopening, after truncation and
// without snapshots.
func TestRebuildFromSegmentLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "topic-0")
	l := openLog(t, dir)
	s := NewStateManager(l.LogEndOffset())
	seqs := map[int64]int32{}
	var snapAt, truncAt int64
	var dupOf []byte
	for i := range 120 {
		pid := int64(i % 4) // 3 is sent without a producer id
		spec := segment.BatchSpec{Records: []segment.Record{
			{Timestamp: int64(1000 + i), Value: bytes.Repeat([]byte{'v'}, 40)},
			{Timestamp: int64(1000 + i), Value: []byte("w")},
		}}
		if pid != 3 {
			spec.Idempotent, spec.ProducerID, spec.BaseSequence = true, pid, seqs[pid]
			seqs[pid] += 2
		}
		b, err := segment.BuildBatch(spec)
		if err != nil {
			t.Fatal(err)
		}
		h, err := segment.ValidateProduced(b)
		if err != nil {
			t.Fatal(err)
		}
		if dup, err := s.Check(h); dup != nil || err != nil {
			t.Fatalf("batch %d refused: %v, %v", i, dup, err)
		}
		if i == 50 {
			dupOf = bytes.Clone(b)
		}
		res, err := l.Append(b, segment.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stored, _ := segment.ParseHeader(b) // as appended
		s.Update(stored, res.BaseOffset)
		switch i {
		case 60:
			snapAt = l.LogEndOffset()
			if err := s.Snapshot(dir, snapAt); err != nil {
				t.Fatal(err)
			}
		case 90:
			truncAt = l.LogEndOffset()
		}
	}
	// A retry of batch 50 comes too late: its producer has sent 17
	// batches since, so it is not among the five cached.
	h, _ := segment.ParseHeader(dupOf)
	if _, err := s.Check(h); ErrorCode(err) != 45 {
		t.Errorf("old retry: got %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
	if n := len(l.Segments()); n < 4 {
		t.Fatalf("%d segments, want several", n)
	}
	leo := l.LogEndOffset()
	want := encoded(t, s, leo)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopen: the snapshot at snapAt plus replay.
	l = openLog(t, dir)
	if l.LogEndOffset() != leo {
		t.Fatalf("reopened log end %d, want %d", l.LogEndOffset(), leo)
	}
	got := NewStateManager(0)
	rep, err := got.Load(dir, l.LogStartOffset(), leo, readerOf(l))
	if err != nil {
		t.Fatal(err)
	}
	if rep.SnapshotOffset != snapAt {
		t.Errorf("snapshot used: got %d, want %d", rep.SnapshotOffset, snapAt)
	}
	if !bytes.Equal(encoded(t, got, leo), want) {
		t.Errorf("state after reopen differs from the live state")
	}
	// A duplicate of the last batch is recognised with its offsets.
	epoch, batches, _ := got.Producer(2)
	last := batches[len(batches)-1]
	b, _ := segment.BuildBatch(segment.BatchSpec{Idempotent: true, ProducerID: 2, ProducerEpoch: epoch,
		BaseSequence: last.FirstSeq, Records: []segment.Record{{}, {}}})
	hd, _ := segment.ParseHeader(b)
	if dup, err := got.Check(hd); err != nil || dup == nil || *dup != last {
		t.Errorf("duplicate after reopen: got %+v, %v; want %+v", dup, err, last)
	}

	// Without snapshots: from the log start.
	fromLog := NewStateManager(0)
	if _, err := fromLog.Load(t.TempDir(), l.LogStartOffset(), leo, readerOf(l)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encoded(t, fromLog, leo), want) {
		t.Errorf("state rebuilt from the log start differs from the live state")
	}

	// Truncation, as a follower does: then Load again with the new end.
	if err := got.Snapshot(dir, leo); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(truncAt); err != nil {
		t.Fatal(err)
	}
	rep, err = got.Load(dir, l.LogStartOffset(), l.LogEndOffset(), readerOf(l))
	if err != nil {
		t.Fatal(err)
	}
	if rep.SnapshotOffset != snapAt || len(rep.Truncated) != 1 {
		t.Errorf("after truncation: got snapshot %d, truncated %v; want %d and the one at %d", rep.SnapshotOffset, rep.Truncated, snapAt, leo)
	}
	fresh := NewStateManager(0)
	if _, err := fresh.Load(t.TempDir(), l.LogStartOffset(), l.LogEndOffset(), readerOf(l)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encoded(t, got, truncAt), encoded(t, fresh, truncAt)) {
		t.Errorf("state after truncation differs from a rebuild of the truncated log")
	}
}
