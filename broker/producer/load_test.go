package producer

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratastream/strata/segment"
)

// memLog is a log in memory: batches with offsets assigned, served by a
// ReadFunc a few batches at a time.
type memLog struct {
	t       *testing.T
	batches [][]byte
	bases   []int64
	end     int64
	perRead int
}

func (l *memLog) append(b []byte) int64 {
	l.t.Helper()
	h, err := segment.ValidateProduced(b)
	if err != nil {
		l.t.Fatal(err)
	}
	segment.SetBaseOffset(b, l.end)
	l.batches, l.bases = append(l.batches, b), append(l.bases, l.end)
	base := l.end
	l.end += int64(h.LastOffsetDelta) + 1
	return base
}

func (l *memLog) read(from int64) ([]byte, error) {
	for i := range l.batches {
		h, _ := segment.ParseHeader(l.batches[i])
		if h.LastOffset() < from {
			continue
		}
		var out []byte
		for j := i; j < len(l.batches) && j < i+l.perRead; j++ {
			out = append(out, l.batches[j]...)
		}
		return out, nil
	}
	return nil, nil
}

// workload produces n random batches from a few producers through Check,
// the memLog and Update, as the server does, and returns the live state.
func workload(t *testing.T, l *memLog, seed uint64, n int) *StateManager {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0))
	s := NewStateManager(l.end)
	type prod struct {
		epoch int16
		seq   int32
	}
	prods := map[int64]*prod{}
	for range n {
		pid := int64(rng.IntN(4)) - 1 // -1 is a non-idempotent producer
		records := 1 + rng.IntN(4)
		spec := segment.BatchSpec{Records: make([]segment.Record, records)}
		for i := range spec.Records {
			spec.Records[i] = segment.Record{Timestamp: int64(1000 + rng.IntN(1000)), Value: []byte("v")}
		}
		if pid >= 0 {
			p := prods[pid]
			if p == nil {
				p = &prod{}
				prods[pid] = p
			}
			if rng.IntN(10) == 0 { // bump the epoch, as a client does after an error
				p.epoch, p.seq = p.epoch+1, 0
			}
			spec.Idempotent, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = true, pid, p.epoch, p.seq
			p.seq = incrementSequence(p.seq, int32(records))
		}
		b, err := segment.BuildBatch(spec)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := segment.ParseHeader(b)
		if dup, err := s.Check(h); dup != nil || err != nil {
			t.Fatalf("workload batch refused: %v %v", dup, err)
		}
		base := l.append(b)
		s.Update(h, base)
	}
	return s
}

func encoded(t *testing.T, s *StateManager, off int64) []byte {
	t.Helper()
	b, err := s.EncodeSnapshot(off)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadFromSnapshotAndReplay(t *testing.T) {
	for seed := range uint64(5) {
		l := &memLog{t: t, perRead: 1 + int(seed%3)}
		dir := t.TempDir()
		live := workload(t, l, seed, 40)
		mid := l.end
		if err := live.Snapshot(dir, mid); err != nil {
			t.Fatal(err)
		}
		live = continueWorkload(t, l, live, 40)
		got := NewStateManager(0)
		rep, err := got.Load(dir, 0, l.end, l.read)
		if err != nil {
			t.Fatal(err)
		}
		if rep.SnapshotOffset != mid || rep.ReplayFrom != mid || rep.Batches != 40 {
			t.Errorf("#%d: got snapshot %d, replay from %d, %d batches; want %d, %d, 40", seed, rep.SnapshotOffset, rep.ReplayFrom, rep.Batches, mid, mid)
		}
		if !bytes.Equal(encoded(t, got, l.end), encoded(t, live, l.end)) {
			t.Errorf("#%d: state from snapshot and replay differs from the live state", seed)
		}
	}
}

func TestLoadEqualsLive(t *testing.T) {
	l := &memLog{t: t, perRead: 2}
	live := workload(t, l, 42, 100)
	for i, from := range []string{"log", "snapshot"} {
		dir := t.TempDir()
		if from == "snapshot" {
			if err := live.Snapshot(dir, l.end); err != nil {
				t.Fatal(err)
			}
		}
		got := NewStateManager(0)
		rep, err := got.Load(dir, 0, l.end, l.read)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(encoded(t, got, l.end), encoded(t, live, l.end)) {
			t.Errorf("#%d: state loaded from the %s differs from the live one (%+v)", i, from, rep)
		}
		if got.End() != l.end {
			t.Errorf("#%d: End: got %d, want %d", i, got.End(), l.end)
		}
	}
}

func TestLoadSkipsCorruptSnapshot(t *testing.T) {
	l := &memLog{t: t, perRead: 3}
	dir := t.TempDir()
	live := workload(t, l, 7, 30)
	first := l.end
	if err := live.Snapshot(dir, first); err != nil {
		t.Fatal(err)
	}
	// Continue the same producers' sequences.
	live = continueWorkload(t, l, live, 30)
	second := l.end
	if err := live.Snapshot(dir, second); err != nil {
		t.Fatal(err)
	}
	want := encoded(t, live, l.end)

	corrupt := func(off int64) {
		t.Helper()
		path := filepath.Join(dir, SnapshotFileName(off))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x40
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		corrupt  []int64
		wantSnap int64
	}{
		{nil, second},
		{[]int64{second}, first},
		{[]int64{second, first}, -1},
	}
	for i, tt := range tests {
		// Restore both snapshots, then damage the chosen ones.
		for _, off := range []int64{first, second} {
			_ = os.Remove(filepath.Join(dir, SnapshotFileName(off)))
		}
		if err := WriteSnapshot(dir, first, snapAt(t, l, first)); err != nil {
			t.Fatal(err)
		}
		if err := WriteSnapshot(dir, second, snapAt(t, l, second)); err != nil {
			t.Fatal(err)
		}
		for _, off := range tt.corrupt {
			corrupt(off)
		}
		got := NewStateManager(0)
		rep, err := got.Load(dir, 0, l.end, l.read)
		if err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		if rep.SnapshotOffset != tt.wantSnap || len(rep.Corrupt) != len(tt.corrupt) {
			t.Errorf("#%d: got snapshot %d, %d corrupt; want %d, %d", i, rep.SnapshotOffset, len(rep.Corrupt), tt.wantSnap, len(tt.corrupt))
		}
		for _, err := range rep.Corrupt {
			if !IsCorrupt(err) {
				t.Errorf("#%d: corrupt report %v is not a corruption error", i, err)
			}
		}
		for _, off := range tt.corrupt {
			if _, err := os.Stat(filepath.Join(dir, SnapshotFileName(off))); !os.IsNotExist(err) {
				t.Errorf("#%d: corrupt snapshot %d: got %v, want deleted", i, off, err)
			}
		}
		if !bytes.Equal(encoded(t, got, l.end), want) {
			t.Errorf("#%d: rebuilt state differs", i)
		}
	}
}

// continueWorkload appends n more batches from the producers s knows,
// continuing their sequences.
func continueWorkload(t *testing.T, l *memLog, s *StateManager, n int) *StateManager {
	t.Helper()
	for i := range n {
		ids := s.ProducerIDs()
		pid := ids[i%len(ids)]
		epoch, batches, _ := s.Producer(pid)
		seq := incrementSequence(batches[len(batches)-1].LastSeq, 1)
		b, err := segment.BuildBatch(segment.BatchSpec{
			Idempotent: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
			Records: []segment.Record{{Timestamp: 5000, Value: []byte("w")}, {Timestamp: 5001}},
		})
		if err != nil {
			t.Fatal(err)
		}
		h, _ := segment.ParseHeader(b)
		if dup, err := s.Check(h); dup != nil || err != nil {
			t.Fatalf("batch refused: %v %v", dup, err)
		}
		s.Update(h, l.append(b))
	}
	return s
}

// snapAt is the snapshot at off of the state the log's first batches imply.
func snapAt(t *testing.T, l *memLog, off int64) []byte {
	t.Helper()
	s := NewStateManager(0)
	if _, _, err := s.replay(0, off, l.read); err != nil {
		t.Fatal(err)
	}
	return encoded(t, s, off)
}

func TestLoadAfterTruncation(t *testing.T) {
	l := &memLog{t: t, perRead: 2}
	dir := t.TempDir()
	s := workload(t, l, 9, 10)
	a := l.end
	if err := s.Snapshot(dir, a); err != nil {
		t.Fatal(err)
	}
	s = continueWorkload(t, l, s, 10)
	b := l.end
	if err := s.Snapshot(dir, b); err != nil {
		t.Fatal(err)
	}
	s = continueWorkload(t, l, s, 10)
	// The log is truncated between a and b (a follower diverged).
	cut := a + (b-a)/2
	for l.end > cut {
		last := len(l.batches) - 1
		l.end = l.bases[last]
		l.batches, l.bases = l.batches[:last], l.bases[:last]
	}
	rep, err := s.Load(dir, 0, l.end, l.read)
	if err != nil {
		t.Fatal(err)
	}
	if rep.SnapshotOffset != a || len(rep.Truncated) != 1 {
		t.Errorf("got snapshot %d, truncated %v; want %d and the one at %d", rep.SnapshotOffset, rep.Truncated, a, b)
	}
	if _, err := os.Stat(filepath.Join(dir, SnapshotFileName(b))); !os.IsNotExist(err) {
		t.Errorf("snapshot beyond the log end: got %v, want deleted", err)
	}
	if !bytes.Equal(encoded(t, s, l.end), snapAt(t, l, l.end)) {
		t.Errorf("state after truncation differs from the truncated log's")
	}
}

func TestLoadLogStartEvicts(t *testing.T) {
	l := &memLog{t: t, perRead: 4}
	put := func(pid int64, seq int32) {
		b, err := segment.BuildBatch(segment.BatchSpec{Idempotent: pid >= 0, ProducerID: pid, BaseSequence: seq,
			Records: []segment.Record{{Value: []byte("x")}}})
		if err != nil {
			t.Fatal(err)
		}
		l.append(b)
	}
	put(1, 0) // 0
	put(2, 0) // 1
	put(1, 1) // 2
	put(-1, 0)
	dir := t.TempDir()
	s := NewStateManager(0)
	if _, err := s.Load(dir, 0, l.end, l.read); err != nil {
		t.Fatal(err)
	}
	if err := s.Snapshot(dir, l.end); err != nil {
		t.Fatal(err)
	}
	// Retention moved the log start to 2: producer 2's only batch is gone.
	rep, err := NewStateManager(0).Load(dir, 2, l.end, l.read)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Evicted != 1 || rep.Producers != 1 {
		t.Errorf("got evicted %d producers %d, want 1 and 1", rep.Evicted, rep.Producers)
	}
	// The same without a snapshot, replaying from the log start.
	got := NewStateManager(0)
	if _, err := got.Load(t.TempDir(), 2, l.end, l.read); err != nil {
		t.Fatal(err)
	}
	if ids := got.ProducerIDs(); len(ids) != 1 || ids[0] != 1 {
		t.Errorf("from the log start: got producers %v, want [1]", ids)
	}
}

func TestLoadReplayErrors(t *testing.T) {
	l := &memLog{t: t, perRead: 1}
	workload(t, l, 1, 5)
	ioErr := errors.New("disk on fire")
	tests := []struct {
		name string
		read ReadFunc
	}{
		{"read error", func(int64) ([]byte, error) { return nil, ioErr }},
		{"no data before the end", func(int64) ([]byte, error) { return nil, nil }},
		{"corrupt batch", func(from int64) ([]byte, error) {
			b, _ := l.read(from)
			b = bytes.Clone(b)
			b[len(b)-1] ^= 1
			return b, nil
		}},
	}
	for i, tt := range tests {
		s := sampleState()
		before := encoded(t, s, 100)
		_, err := s.Load(t.TempDir(), 0, l.end, tt.read)
		if !errors.Is(err, ErrReplay) {
			t.Errorf("#%d %s: got %v, want ErrReplay", i, tt.name, err)
		}
		if !bytes.Equal(encoded(t, s, 100), before) {
			t.Errorf("#%d %s: failed Load changed the state", i, tt.name)
		}
	}
}
