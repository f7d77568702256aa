package tiering

import (
	"encoding/binary"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
)

// replicate copies the leader's log from the follower's end up to the
// leader's end, as a follower fetching in chunks does (with its own
// segment boundaries).
func replicate(t *testing.T, from, to *testLog) {
	t.Helper()
	for off := to.log.LogEndOffset(); off < from.log.LogEndOffset(); {
		b, err := from.log.ReadCopy(off, 700, from.log.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		res, err := to.log.AppendReplicated(b)
		if err != nil {
			t.Fatal(err)
		}
		off = res.LastOffset + 1
	}
	from.mu.Lock()
	to.mu.Lock()
	maps.Copy(to.produced, from.produced)
	to.mu.Unlock()
	from.mu.Unlock()
}

// TestArchiverLeaderChange: the leader of epoch 1 uploads, a follower with
// other segment boundaries takes over at epoch 2 and continues from the
// manifest (uploading slices of its segments), and the deposed leader's
// late commit is refused.
func TestArchiverLeaderChange(t *testing.T) {
	s := newTestLocalStore(t)
	// Segments big enough for index entries. The old leader seals [0, 53)
	// and [53, 106); the follower's segment from 74 is uploaded from 106.
	old := newTestLog(t, 10000)
	follower := newTestLog(t, 14000)
	old.produce(120)
	replicate(t, old, follower)

	a := newTestArchiver(t, old, s, nil)
	a.BecomeLeader(1)
	waitUploaded(t, a, old.sealedEnd())
	handover := a.Manifest().EndOffset()

	// The follower becomes leader at epoch 2 and writes more.
	follower.epoch = 2
	follower.produce(60)
	b := newTestArchiver(t, follower, s, nil)
	b.BecomeLeader(2)
	waitUploaded(t, b, follower.sealedEnd())
	m := b.Manifest()
	if m.LeaderEpoch != 2 || m.Segments[0].BaseOffset != 0 {
		t.Fatalf("manifest epoch %d from %d", m.LeaderEpoch, m.Segments[0].BaseOffset)
	}
	sliced := 0
	for i := range m.Segments {
		rs := &m.Segments[i]
		if rs.BaseOffset < handover && rs.Epoch != 1 || rs.BaseOffset >= handover && rs.Epoch != 2 {
			t.Errorf("segment %d uploaded at epoch %d, handover at %d", rs.BaseOffset, rs.Epoch, handover)
		}
		if rs.Epoch == 2 && !isLocalSegmentBase(follower, rs.BaseOffset) {
			sliced++
			checkSliceIndexes(t, s, rs)
		}
	}
	if sliced == 0 {
		t.Error("the new leader uploaded no slice: the test's segment boundaries coincide")
	}
	// Epoch entries: 1 up to the handover region, then 2.
	if es := m.LeaderEpochEntries(); len(es) != 2 || es[0].Epoch != 1 || es[1].Epoch != 2 {
		t.Errorf("epochs %v", es)
	}
	checkAllRecords(t, follower, m, storeReader(s))

	// The deposed leader still thinks it leads and has data to upload.
	old.produce(80)
	waitFor(t, 10*time.Second, "the old leader fenced", func() bool { return a.Lag().Fenced })
	if l := a.Lag(); !errors.Is(l.LastError, ErrFenced) {
		t.Fatalf("old leader lag %+v", l)
	}
	cur, _, err := LoadManifest(testCtx(t), s, testTopic, testTopicID, testPartition)
	if err != nil || cur.LeaderEpoch != 2 || cur.EndOffset() != m.EndOffset() {
		t.Fatalf("manifest after the late write: %v, %v", cur, err)
	}
	// A new term for the old broker lifts the fence.
	a.BecomeLeader(3)
	waitFor(t, 10*time.Second, "fence lifted", func() bool { return !a.Lag().Fenced })
}

func isLocalSegmentBase(tl *testLog, base int64) bool {
	for _, s := range tl.log.Segments() {
		if s.BaseOffset == base {
			return true
		}
	}
	return false
}

// checkSliceIndexes checks a sliced segment's rebuilt indexes against its
// .log object: every offset entry points at the batch it names, and the
// time index ends with the segment's largest timestamp.
func checkSliceIndexes(t *testing.T, s ObjectStore, rs *RemoteSegment) {
	t.Helper()
	log := mustGet(t, s, testSegKey(rs, SuffixLog), 0, -1)
	idx := mustGet(t, s, testSegKey(rs, SuffixIndex), 0, -1)
	tidx := mustGet(t, s, testSegKey(rs, SuffixTimeIndex), 0, -1)
	if int64(len(log)) != rs.Size {
		t.Fatalf("slice %d: %d bytes, manifest says %d", rs.BaseOffset, len(log), rs.Size)
	}
	first, err := segment.ParseHeader(log)
	if err != nil || first.BaseOffset != rs.BaseOffset {
		t.Fatalf("slice %d starts with batch %d: %v", rs.BaseOffset, first.BaseOffset, err)
	}
	if len(idx) == 0 || len(idx)%8 != 0 {
		t.Fatalf("slice %d: index of %d bytes", rs.BaseOffset, len(idx))
	}
	for i := 0; i < len(idx); i += 8 {
		rel, pos := binary.BigEndian.Uint32(idx[i:]), binary.BigEndian.Uint32(idx[i+4:])
		h, err := segment.ParseHeader(log[pos:])
		if err != nil || h.BaseOffset != rs.BaseOffset+int64(rel) {
			t.Fatalf("slice %d: index entry %d (%d, %d) -> batch %d, %v", rs.BaseOffset, i/8, rel, pos, h.BaseOffset, err)
		}
	}
	if len(tidx) == 0 || len(tidx)%12 != 0 {
		t.Fatalf("slice %d: time index of %d bytes", rs.BaseOffset, len(tidx))
	}
	if ts := int64(binary.BigEndian.Uint64(tidx[len(tidx)-12:])); ts != rs.MaxTimestamp {
		t.Fatalf("slice %d: last time entry %d, max timestamp %d", rs.BaseOffset, ts, rs.MaxTimestamp)
	}
}
