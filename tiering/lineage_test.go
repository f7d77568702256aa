package tiering

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
)

func ee(pairs ...int64) []segment.EpochEntry {
	var out []segment.EpochEntry
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, segment.EpochEntry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return out
}

func TestFirstMismatch(t *testing.T) {
	for i, tc := range []struct {
		a, b     []segment.EpochEntry
		from, to int64
		want     int64
		diverged bool
	}{
		{ee(1, 0), ee(1, 0), 0, 100, 0, false},
		{ee(1, 0, 2, 50), ee(1, 0), 0, 100, 50, true},
		{ee(1, 0, 2, 50), ee(1, 0, 2, 50), 0, 100, 0, false},
		{ee(1, 0, 2, 50), ee(1, 0, 3, 50), 0, 100, 50, true},
		{ee(1, 0, 2, 50), ee(1, 0, 2, 60), 0, 100, 50, true},
		{ee(1, 0, 2, 50), ee(1, 0), 0, 50, 0, false},   // the difference lies beyond to
		{ee(1, 0, 2, 50), ee(1, 0), 60, 100, 60, true}, // from inside the difference
		{ee(2, 0), ee(1, 0), 0, 10, 0, true},           // at the very start
		{ee(-1, 0, 2, 50), ee(1, 0), 0, 100, 50, true}, // unknown compares equal
		{ee(1, 10), ee(2, 0), 0, 100, 10, true},        // before a's first entry nothing is known
		{ee(-1, 0), ee(7, 0, 8, 5), 0, 100, 0, false},
	} {
		got, diverged := firstMismatch(tc.a, tc.b, tc.from, tc.to)
		if diverged != tc.diverged || (diverged && got != tc.want) {
			t.Errorf("#%d: got %d %v, want %d %v", i, got, diverged, tc.want, tc.diverged)
		}
	}
}

// lineageManifest has segments [0,10) [10,20) [20,30) with the given
// leader-epoch entries.
func lineageManifest(entries ...[]segment.EpochEntry) *Manifest {
	m := NewManifest(testTopic, testTopicID, testPartition)
	m.LeaderEpoch = 9
	for i, es := range entries {
		m.Segments = append(m.Segments, RemoteSegment{BaseOffset: int64(10 * i), NextOffset: int64(10*i + 10), Size: 1, Epoch: 1,
			ID: fmt.Sprintf("s%d", i), LeaderEpochs: es})
	}
	return m
}

func TestCoveredInLineage(t *testing.T) {
	m := lineageManifest(ee(1, 0), ee(1, 10, 2, 15), ee(3, 20))
	seg := func(base, next int64, es []segment.EpochEntry) segment.SegmentInfo {
		return segment.SegmentInfo{BaseOffset: base, NextOffset: next, LeaderEpochs: es}
	}
	for i, tc := range []struct {
		logStart int64
		si       segment.SegmentInfo
		want     bool
	}{
		{0, seg(0, 10, ee(1, 0)), true},
		{0, seg(0, 20, ee(1, 0, 2, 15)), true},
		{0, seg(5, 18, ee(1, 5, 2, 15)), true},    // other segment boundaries
		{0, seg(5, 18, ee(1, 5, 2, 16)), false},   // epoch 2 starts later locally
		{0, seg(10, 20, ee(1, 10)), false},        // offsets 15..19 were epoch 2 remotely
		{0, seg(20, 30, ee(4, 20)), false},        // another leader's data
		{0, seg(20, 30, nil), true},               // no local epochs: nothing contradicts
		{15, seg(0, 10, ee(1, 0)), true},          // below the remote log start, older epoch
		{15, seg(0, 10, ee(2, 0)), true},          // the epoch at the log start may go back further
		{15, seg(0, 10, ee(1, 0, 3, 5)), false},   // an epoch newer than the log start's
		{15, seg(10, 20, ee(1, 10, 2, 15)), true}, // straddles the log start
		{15, seg(10, 20, ee(1, 10, 3, 12)), false},
	} {
		mm := m.Clone()
		mm.LogStartOffset = tc.logStart
		if got := coveredInLineage(mm, tc.si); got != tc.want {
			t.Errorf("#%d: got %v, want %v", i, got, tc.want)
		}
	}
}

func TestCutAt(t *testing.T) {
	m := lineageManifest(ee(1, 0), ee(1, 10, 2, 15), ee(3, 20))
	m.Segments[1].HasSnapshot = true
	dropped := cutAt(m, 13)
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(m.Segments) != 2 || m.EndOffset() != 13 || m.Segments[1].HasSnapshot || m.Segments[1].Size != 1 ||
		len(m.Segments[1].LeaderEpochs) != 1 || m.Segments[1].ID != "s1" {
		t.Fatalf("cut manifest %+v", m.Segments)
	}
	if len(dropped) != 1 || dropped[0].ID != "s2" {
		t.Fatalf("dropped %+v", dropped)
	}
	m = lineageManifest(ee(1, 0), ee(1, 10), ee(3, 20))
	if dropped := cutAt(m, 20); len(m.Segments) != 2 || len(dropped) != 1 || m.EndOffset() != 20 {
		t.Fatalf("cut at a segment boundary: %d segments, %d dropped", len(m.Segments), len(dropped))
	}
}

// divergedLogs uploads the log of an old leader (epoch 1) and returns, with
// the store and that manifest, the log of a new leader elected uncleanly:
// the same first records (epoch 1) up to diverge, then records of its own
// at epoch 2 (values "fresh-...", where the old leader's are "value-...").
func divergedLogs(t *testing.T, diverge int) (*LocalStore, *Manifest, *testLog) {
	t.Helper()
	s := newTestLocalStore(t)
	old := newTestLog(t, testSegBytes)
	old.produce(60)
	a := newTestArchiver(t, old, s, nil)
	a.BecomeLeader(1)
	waitUploaded(t, a, old.sealedEnd())
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	old.gate.Detach(a)
	m := a.Manifest()
	u := newTestLog(t, testSegBytes)
	u.produce(diverge)
	u.epoch, u.prefix = 2, "fresh"
	u.produce(60)
	return s, m, u
}

// readRemoteValues reads m's remote log through a RemoteReader and returns
// every record's value by offset.
func readRemoteValues(t *testing.T, s ObjectStore, m *Manifest) map[int64]string {
	t.Helper()
	r := newTestReader(t, s, ReaderConfig{})
	out := map[int64]string{}
	for off := m.LogStartOffset; off < m.EndOffset(); {
		rs, err := r.Read(testCtx(t), PartitionKey{Topic: m.Topic, Partition: m.Partition}, m, off, 1<<20)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		b, err := rs.Copy()
		rs.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := segment.SplitBatches(b, func(h segment.Header, batch []byte) error {
			if h.BaseOffset >= m.EndOffset() {
				return fmt.Errorf("batch at %d beyond the remote end %d", h.BaseOffset, m.EndOffset())
			}
			recs, err := segment.Records(batch)
			for _, rec := range recs {
				out[rec.Offset] = string(rec.Value)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if rs.NextOffset <= off {
			t.Fatalf("read at %d does not advance", off)
		}
		off = rs.NextOffset
	}
	return out
}

// TestArchiverSupersedesDivergedRemote: after an unclean election the new
// leader's log parts from the remote log at 16, inside a remote segment.
// Before its archiver runs, local deletion is vetoed from the diverging
// segment on; the archiver then cuts the remote log at 16 (the segment
// holding it ends there, the later ones are dropped and deleted) and
// uploads its own data from 16, so the remote log read from 0 holds the
// common records and then only the new leader's.
func TestArchiverSupersedesDivergedRemote(t *testing.T) {
	const diverge = 16
	s, old, u := divergedLogs(t, diverge)
	if old.SegmentFor(diverge) < 0 || old.Segments[old.SegmentFor(diverge)].BaseOffset == diverge || old.EndOffset() <= diverge+11 {
		t.Fatalf("the old remote log [%d, %d) does not hold %d inside a segment", old.LogStartOffset, old.EndOffset(), diverge)
	}
	f := newTestArchiver(t, u, s, nil) // as follower: sees the old manifest, uploads nothing
	waitFor(t, 10*time.Second, "the manifest loaded", func() bool { return f.Manifest() != nil })
	for _, si := range u.log.Segments() {
		want := si.NextOffset <= diverge
		if got := f.CanDeleteLocal(si); got != want && si.NextOffset <= old.EndOffset() {
			t.Errorf("before reconciling: CanDeleteLocal([%d, %d)) = %v, want %v", si.BaseOffset, si.NextOffset, got, want)
		}
	}

	f.BecomeLeader(2)
	waitFor(t, 10*time.Second, "the new leader's data uploaded", func() bool {
		m := f.Manifest()
		return m.EndOffset() >= u.sealedEnd() && m.Segments[len(m.Segments)-1].Epoch == 2
	})
	waitPurged(t, f)
	m := f.Manifest()
	cut := m.SegmentFor(diverge - 1)
	if cut < 0 || m.Segments[cut].NextOffset != diverge || m.Segments[cut].ID != old.Segments[old.SegmentFor(diverge)].ID ||
		m.Segments[cut+1].BaseOffset != diverge || m.Segments[cut+1].Epoch != 2 {
		t.Fatalf("manifest after reconciling: %+v", m.Segments)
	}
	for i := range old.Segments[old.SegmentFor(diverge)+1:] {
		seg := &old.Segments[old.SegmentFor(diverge)+1+i]
		if _, err := s.Stat(testCtx(t), old.SegmentKey(seg, SuffixLog)); !IsNotFound(err) {
			t.Errorf("superseded segment %d kept: %v", seg.BaseOffset, err)
		}
	}
	vals := readRemoteValues(t, s, m)
	for off := int64(0); off < m.EndOffset(); off++ {
		want := "value-"
		if off >= diverge {
			want = "fresh-"
		}
		if !strings.HasPrefix(vals[off], want) || vals[off] != u.produced[off] {
			t.Fatalf("remote record at %d: %.20q, want the new leader's %.20q", off, vals[off], u.produced[off])
		}
	}
	for _, si := range u.log.Segments() {
		if si.Sealed && !f.CanDeleteLocal(si) {
			t.Errorf("after reconciling: CanDeleteLocal([%d, %d)) = false", si.BaseOffset, si.NextOffset)
		}
	}
}

// TestArchiverRefusesDivergenceWithoutHistory: a leader whose log shares
// nothing with the remote log (every offset written in another epoch, as
// a leader whose data directory was lost and refilled) leaves the remote
// log alone, uploads nothing and deletes nothing locally.
func TestArchiverRefusesDivergenceWithoutHistory(t *testing.T) {
	s, old, _ := divergedLogs(t, 0)
	u := newTestLog(t, testSegBytes)
	u.epoch, u.prefix = 2, "fresh"
	u.produce(50)
	a := newTestArchiver(t, u, s, nil)
	a.BecomeLeader(2)
	waitFor(t, 10*time.Second, "the divergence refused", func() bool {
		return errors.Is(a.Lag().LastError, ErrDiverged)
	})
	waitSteps(t, a, 2)
	m, _, err := LoadManifest(testCtx(t), s, testTopic, testTopicID, testPartition)
	if err != nil || m.EndOffset() != old.EndOffset() || len(m.Segments) != len(old.Segments) || m.LeaderEpoch != old.LeaderEpoch {
		t.Fatalf("remote log changed: %+v, %v", m, err)
	}
	for _, si := range u.log.Segments() {
		if a.CanDeleteLocal(si) {
			t.Errorf("CanDeleteLocal([%d, %d)) = true for a diverged segment", si.BaseOffset, si.NextOffset)
		}
	}
}

// TestCutLowersRemoteCleanerCheckpoint: a cut below the remote cleaner
// checkpoint lowers it to the cut, so what is uploaded there again is
// dirty; a cut above it leaves it.
func TestCutLowersRemoteCleanerCheckpoint(t *testing.T) {
	for i, tc := range []struct{ ckpt, cut, want int64 }{
		{400, 250, 250},
		{400, 300, 300},
		{200, 350, 200},
		{0, 150, 0},
	} {
		m := testManifest(3) // [100, 400)
		m.RemoteCleanerCheckpoint = tc.ckpt
		cutAt(m, tc.cut)
		if m.RemoteCleanerCheckpoint != tc.want || m.Validate() != nil {
			t.Errorf("#%d: cut at %d of checkpoint %d: got %d (valid: %v), want %d", i, tc.cut, tc.ckpt, m.RemoteCleanerCheckpoint, m.Validate(), tc.want)
		}
	}
}
