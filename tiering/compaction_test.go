package tiering

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/tiering/miniotest"
)

// compactLog is a real segment.Log of a compacted topic wired to a Gate,
// with what was produced per offset.
type compactLog struct {
	t    *testing.T
	log  *segment.Log
	gate *Gate
	keys int

	mu       sync.Mutex
	produced map[int64]keyedValue
	n        int
}

type keyedValue struct {
	key   string
	value []byte // nil: a tombstone
}

func newCompactLog(t *testing.T, keys int) *compactLog {
	t.Helper()
	cl := &compactLog{t: t, gate: NewGate(true), keys: keys, produced: map[int64]keyedValue{}}
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = testSegBytes
	cfg.IndexIntervalBytes = 256
	cfg.FileDeleteDelayMs = 0
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	l, err := segment.Open(filepath.Join(t.TempDir(), testTopic+"-1"), cfg, cl.gate.SegmentOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	cl.log = l
	return cl
}

// produce appends n batches of 1 to 3 records of keys k000..; every
// eleventh record is a tombstone.
func (cl *compactLog) produce(n int) {
	cl.t.Helper()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for range n {
		var recs []segment.Record
		var kvs []keyedValue
		for range 1 + cl.n%3 {
			k := fmt.Sprintf("k%03d", (cl.n*7)%cl.keys)
			var v []byte
			if cl.n%11 != 10 {
				v = fmt.Appendf(nil, "%s-v%06d-%s", k, cl.n, strings.Repeat("x", 40))
			}
			recs = append(recs, segment.Record{Timestamp: time.Now().UnixMilli(), Key: []byte(k), Value: v})
			kvs = append(kvs, keyedValue{k, v})
			cl.n++
		}
		b, err := segment.BuildBatch(segment.BatchSpec{Records: recs})
		if err != nil {
			cl.t.Fatal(err)
		}
		res, err := cl.log.Append(b, segment.AppendOptions{LeaderEpoch: 1})
		if err != nil {
			cl.t.Fatal(err)
		}
		for i, kv := range kvs {
			cl.produced[res.BaseOffset+int64(i)] = kv
		}
	}
}

// clean runs the local cleaner once and returns the cleaner checkpoint.
func (cl *compactLog) clean() int64 { return cl.cleanWith(24 * 3600 * 1000) }

// cleanWith is clean with delete.retention.ms ms.
func (cl *compactLog) cleanWith(deleteRetentionMs int64) int64 {
	cl.t.Helper()
	om, err := segment.NewOffsetMap(1<<20, 0.9)
	if err != nil {
		cl.t.Fatal(err)
	}
	if _, err := cl.log.Clean(context.Background(), segment.CleanConfig{Map: om, DeleteRetentionMs: deleteRetentionMs}); err != nil {
		cl.t.Fatal(err)
	}
	return cl.log.CleanerCheckpoint()
}

// cleanedEnd is the end of the last non-empty sealed segment wholly below
// ckpt: what the upload gate lets through.
func (cl *compactLog) cleanedEnd(ckpt int64) int64 {
	end := int64(0)
	for _, s := range cl.log.Segments() {
		if s.Sealed && s.Size > 0 && s.NextOffset <= ckpt {
			end = s.NextOffset
		}
	}
	return end
}

// latest returns, for every key, the offset of its last record below end.
func (cl *compactLog) latest(end int64) map[string]int64 {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	out := map[string]int64{}
	for off, kv := range cl.produced {
		if cur, ok := out[kv.key]; off < end && (!ok || off > cur) {
			out[kv.key] = off
		}
	}
	return out
}

func compactArchiverConfig(t *testing.T, cl *compactLog, store ObjectStore) ArchiverConfig {
	return ArchiverConfig{
		Store: store, Log: cl.log, Topic: testTopic, TopicID: testTopicID, Partition: testPartition,
		NumPartitions: 3, Configs: map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact"},
		Retention:    RemoteRetention{Ms: -1, Bytes: -1},
		PollInterval: 20 * time.Millisecond, RefreshInterval: 200 * time.Millisecond,
		RetryMin: 20 * time.Millisecond, RetryMax: 300 * time.Millisecond,
		Compaction: Compaction{
			Enabled: true, MinCleanableDirtyRatio: 0.01, DeleteRetentionMs: 24 * 3600 * 1000, SegmentBytes: 3 * testSegBytes,
		},
		RemoteClean: RemoteCleanConfig{Interval: 10 * time.Millisecond, TempDir: t.TempDir(), MapBytes: 1 << 20},
	}
}

// remoteRecord is one record read back from the remote log.
type remoteRecord struct {
	offset int64
	key    string
	value  []byte
}

// readRemote reads m's remote log from its start with r, in small reads,
// switching to the manifest next() returns before each read when not nil.
func readRemote(t *testing.T, r *RemoteReader, m *Manifest, from int64, stop int64) ([]remoteRecord, int64) {
	t.Helper()
	var out []remoteRecord
	off := max(from, m.LogStartOffset)
	for off < min(stop, m.EndOffset()) {
		rs, err := r.Read(context.Background(), PartitionKey{Topic: testTopic, Partition: testPartition}, m, off, 700)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		b, err := rs.Copy()
		rs.Release()
		if err != nil {
			t.Fatal(err)
		}
		if rs.NextOffset <= off {
			t.Fatalf("read at %d: next offset %d does not advance", off, rs.NextOffset)
		}
		err = segment.SplitBatches(b, func(h segment.Header, batch []byte) error {
			recs, err := segment.Records(batch)
			for _, rec := range recs {
				if rec.Offset >= off {
					out = append(out, remoteRecord{rec.Offset, string(rec.Key), rec.Value})
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		off = rs.NextOffset
	}
	return out, off
}

// checkCompacted checks Kafka's guarantee on records read from offset 0
// of a log holding produced offsets below end: offsets strictly increase,
// every value read is the one produced at its offset, and the latest
// record of every key is there. With exact, no key appears twice.
func checkCompacted(t *testing.T, cl *compactLog, recs []remoteRecord, end int64, exact bool) {
	t.Helper()
	seen := map[string]int64{}
	for i, rec := range recs {
		if i > 0 && rec.offset <= recs[i-1].offset {
			t.Fatalf("offset %d after %d", rec.offset, recs[i-1].offset)
		}
		cl.mu.Lock()
		want, ok := cl.produced[rec.offset]
		cl.mu.Unlock()
		if !ok || want.key != rec.key || string(want.value) != string(rec.value) || (want.value == nil) != (rec.value == nil) {
			t.Fatalf("offset %d: read %s=%q, produced %+v", rec.offset, rec.key, rec.value, want)
		}
		if prev, dup := seen[rec.key]; dup && exact {
			t.Errorf("key %s at %d and again at %d after a full cleaning", rec.key, prev, rec.offset)
		}
		seen[rec.key] = rec.offset
	}
	for k, off := range cl.latest(end) {
		if seen[k] != off {
			t.Errorf("key %s: latest record at %d, last read at %d", k, off, seen[k])
		}
	}
}

// TestCompactedUploadGate: a compacted topic uploads only what the local
// cleaner cleaned (or what is older than max.compaction.lag.ms), across
// the offset gaps cleaning leaves, and the remote cleaner compacts what is
// remote until every key appears once.
func TestCompactedUploadGateAndRemoteClean(t *testing.T) {
	s := newTestLocalStore(t)
	testCompactedTier(t, s, storeLister(s))
}

// TestCompactedTierMinIO is TestCompactedUploadGateAndRemoteClean against
// a real MinIO, the bucket listed with minio-go.
func TestCompactedTierMinIO(t *testing.T) {
	m := miniotest.Start(t)
	s, bucket := newS3Store(t, m, nil)
	testCompactedTier(t, s, func(t *testing.T, prefix string) []string {
		t.Helper()
		var keys []string
		for o := range m.Client().ListObjects(testCtx(t), bucket, minio.ListObjectsOptions{Prefix: "strata/test/" + prefix, Recursive: true}) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			keys = append(keys, strings.TrimPrefix(o.Key, "strata/test/"))
		}
		return keys
	})
}

// lister lists the keys under prefix, possibly with another client than
// the store under test.
type lister func(t *testing.T, prefix string) []string

func storeLister(s ObjectStore) lister {
	return func(t *testing.T, prefix string) []string {
		t.Helper()
		objs, err := s.List(testCtx(t), prefix)
		if err != nil {
			t.Fatal(err)
		}
		keys := make([]string, len(objs))
		for i, o := range objs {
			keys[i] = o.Key
		}
		return keys
	}
}

func testCompactedTier(t *testing.T, store ObjectStore, list lister) {
	cl := newCompactLog(t, 50)
	cl.produce(200)
	a, err := NewArchiver(compactArchiverConfig(t, cl, store))
	if err != nil {
		t.Fatal(err)
	}
	cl.gate.Attach(a)
	a.Start()
	t.Cleanup(func() { _ = a.Close() })
	a.BecomeLeader(1)
	waitSteps(t, a, 3)
	if m := a.Manifest(); m == nil || len(m.Segments) != 0 {
		t.Fatalf("uploaded dirty segments: %+v", m)
	}

	ckpt := cl.clean()
	want := cl.cleanedEnd(ckpt)
	if want == 0 {
		t.Fatal("the cleaner cleaned nothing")
	}
	waitUploaded(t, a, want)
	if end := a.Manifest().EndOffset(); end > ckpt {
		t.Fatalf("remote end %d beyond the cleaner checkpoint %d", end, ckpt)
	}

	// More data, cleaned locally again: the cleaner regroups segments the
	// bucket already holds part of, and leaves gaps at the remote end.
	for range 3 {
		cl.produce(150)
		ckpt = cl.clean()
		want = cl.cleanedEnd(ckpt)
		waitUploaded(t, a, want)
	}
	m := a.Manifest()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Logf("remote log [%d, %d) in %d segments, cleaner checkpoint %d", m.LogStartOffset, m.EndOffset(), len(m.Segments), ckpt)

	// The remote cleaner catches up with the uploads.
	waitFor(t, 60*time.Second, "the remote cleaner to cover the remote log", func() bool {
		m = a.Manifest()
		st := a.RemoteCleanStats()
		return st.Rounds > 0 && st.CheckpointOffset >= m.EndOffset() && m.EndOffset() >= want
	})
	st := a.RemoteCleanStats()
	t.Logf("remote cleaner: %+v", st)
	if st.RecordsRemoved == 0 || st.SegmentsReplaced == 0 {
		t.Errorf("remote cleaner removed nothing: %+v", st)
	}
	// Dropped segments go after the delete delay (0 here).
	waitFor(t, 30*time.Second, "dropped segments purged", func() bool { m = a.Manifest(); return len(m.Dropped) == 0 })
	checkOnlyReferenced(t, list, m)
	checkRemoteIndexes(t, store, m)

	r := newTestReader(t, store, ReaderConfig{ChunkBytes: 1024})
	recs, _ := readRemote(t, r, m, 0, m.EndOffset())
	checkCompacted(t, cl, recs, m.EndOffset(), true)
}

// checkOnlyReferenced checks that the store holds exactly the objects of
// m's live and dropped segments (and the manifest).
func checkOnlyReferenced(t *testing.T, list lister, m *Manifest) {
	t.Helper()
	want := map[string]bool{m.Key(): true}
	for i := range m.Segments {
		for _, k := range m.SegmentKeys(&m.Segments[i]) {
			want[k] = true
		}
	}
	for i := range m.Dropped {
		for _, k := range m.SegmentKeys(&m.Dropped[i].RemoteSegment) {
			want[k] = true
		}
	}
	have := map[string]bool{}
	for _, k := range list(t, m.Prefix()) {
		have[k] = true
		if !want[k] {
			t.Errorf("object %s is referenced by no manifest entry", k)
		}
	}
	for k := range want {
		if !have[k] {
			t.Errorf("the manifest references %s, which is missing", k)
		}
	}
}

// TestCompactedUploadAfterMaxLag: without a local cleaning, segments go to
// the bucket once their data is older than max.compaction.lag.ms.
func TestCompactedUploadAfterMaxLag(t *testing.T) {
	cl := newCompactLog(t, 10)
	cl.produce(120)
	cfg := compactArchiverConfig(t, cl, newMemStore())
	cfg.Compaction.MaxCompactionLagMs = 50
	cfg.RemoteClean.Disabled = true
	a, err := NewArchiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl.gate.Attach(a)
	a.Start()
	t.Cleanup(func() { _ = a.Close() })
	a.BecomeLeader(1)
	end := int64(0)
	for _, s := range cl.log.Segments() {
		if s.Sealed {
			end = s.NextOffset
		}
	}
	waitUploaded(t, a, end)
	if cl.log.CleanerCheckpoint() != 0 {
		t.Fatal("the log was cleaned")
	}
}

// newCompactArchiver is NewArchiver with the remote cleaner's test hook
// set before the loop starts.
func newCompactArchiver(t *testing.T, cfg ArchiverConfig, gate *Gate, holdClean bool, afterUpload func() error) *Archiver {
	t.Helper()
	a, err := NewArchiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.rc.afterUpload = afterUpload
	if holdClean {
		// No remote cleaning before the first interval (an hour).
		a.rc.tried, a.rc.lastTry = true, a.cfg.Mono()
	}
	gate.Attach(a)
	a.Start()
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// TestRemoteCleanFencedByNewerLeader: a newer leader commits the manifest
// while the remote cleaner uploads its replacements; the cleaner's swap is
// refused (ErrFenced), the newer manifest stays, it references only
// complete objects, and the replacements are left unreferenced for the
// sweeper.
func TestRemoteCleanFencedByNewerLeader(t *testing.T) {
	cl := newCompactLog(t, 45)
	cl.produce(250)
	ckpt := cl.clean()
	store := newMemStore()
	cfg := compactArchiverConfig(t, cl, store)
	var once sync.Once
	var hookErr error
	fenced := make(chan struct{})
	hook := func() error {
		once.Do(func() {
			defer close(fenced)
			m, etag, err := LoadManifest(context.Background(), store, testTopic, testTopicID, testPartition)
			if err != nil {
				hookErr = err
				return
			}
			newer := m.Clone()
			newer.LeaderEpoch = m.LeaderEpoch + 1
			_, hookErr = CommitManifest(context.Background(), store, newer, etag)
		})
		return nil
	}
	// The first uploads commit with the remote cleaner held back.
	cfg.RemoteClean.Interval = time.Hour
	a := newCompactArchiver(t, cfg, cl.gate, true, hook)
	a.BecomeLeader(1)
	waitUploaded(t, a, cl.cleanedEnd(ckpt))
	_ = a.Close()

	// A second archiver of the same epoch cleans; the hook fences it.
	cfg.RemoteClean.Interval = 10 * time.Millisecond
	b := newCompactArchiver(t, cfg, cl.gate, false, hook)
	b.BecomeLeader(1)
	select {
	case <-fenced:
	case <-time.After(60 * time.Second):
		t.Fatal("the remote cleaner never uploaded replacements")
	}
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	waitFor(t, 30*time.Second, "the archiver fenced", func() bool { return b.Lag().Fenced })
	if st := b.RemoteCleanStats(); st.Rounds != 0 {
		t.Errorf("a fenced cleaning counted as committed: %+v", st)
	}
	m, _, err := LoadManifest(testCtx(t), store, testTopic, testTopicID, testPartition)
	if err != nil {
		t.Fatal(err)
	}
	if m.LeaderEpoch != 2 || len(m.Dropped) != 0 {
		t.Fatalf("stored manifest epoch %d, %d dropped: the fenced swap landed", m.LeaderEpoch, len(m.Dropped))
	}
	// Every object the manifest names exists; the replacements are extra.
	objs, err := store.List(testCtx(t), m.Prefix())
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, o := range objs {
		have[o.Key] = true
	}
	referenced := map[string]bool{}
	for i := range m.Segments {
		for _, k := range m.SegmentKeys(&m.Segments[i]) {
			referenced[k] = true
			if !have[k] {
				t.Errorf("manifest references missing %s", k)
			}
		}
	}
	orphans := 0
	for k := range have {
		if !referenced[k] && k != m.Key() {
			orphans++
		}
	}
	if orphans == 0 {
		t.Error("no replacement objects were uploaded before the fenced commit")
	}
	r := newTestReader(t, store, ReaderConfig{ChunkBytes: 1024})
	recs, _ := readRemote(t, r, m, 0, m.EndOffset())
	checkCompacted(t, cl, recs, m.EndOffset(), false)
}

// TestReaderAcrossRemoteSwap: a reader that resolved the manifest before a
// remote cleaning's swap reads on from the old objects (still there for
// the delete delay), then with the new manifest; offsets only increase,
// and nothing it reads is older than a value of the same key it read
// before.
func TestReaderAcrossRemoteSwap(t *testing.T) {
	cl := newCompactLog(t, 40)
	cl.produce(300)
	ckpt := cl.clean()
	store := newMemStore()
	cfg := compactArchiverConfig(t, cl, store)
	cfg.Retention.DeleteDelay = time.Hour
	cfg.RemoteClean.Interval = time.Hour
	r := newTestReader(t, store, ReaderConfig{ChunkBytes: 1024})

	var (
		old       *Manifest
		firstPart []remoteRecord
		resume    int64
	)
	hook := func() error {
		if old == nil {
			return nil
		}
		// Mid-read when the swap is about to be committed.
		firstPart, resume = readRemote(t, r, old, 0, old.EndOffset()/2)
		return nil
	}
	a := newCompactArchiver(t, cfg, cl.gate, true, hook)
	a.BecomeLeader(1)
	waitUploaded(t, a, cl.cleanedEnd(ckpt))
	// Newer values of the same keys, uploaded too: the bucket holds
	// values they supersede.
	cl.produce(300)
	ckpt = cl.clean()
	waitUploaded(t, a, cl.cleanedEnd(ckpt))
	_ = a.Close()

	old = a.Manifest()
	checkRemoteIndexes(t, store, old) // uploads across gaps and slices of regrouped segments
	cfg.RemoteClean.Interval = 10 * time.Millisecond
	b := newCompactArchiver(t, cfg, cl.gate, false, hook)
	b.BecomeLeader(1)
	waitFor(t, 60*time.Second, "a remote cleaning", func() bool { return b.RemoteCleanStats().Rounds > 0 })
	_ = b.Close()
	swapped := b.Manifest()
	if len(swapped.Dropped) == 0 || len(firstPart) == 0 {
		t.Fatalf("swap dropped %d segments, %d records read before it", len(swapped.Dropped), len(firstPart))
	}
	// The old manifest still reads whole: its objects are dropped, not
	// deleted.
	all, _ := readRemote(t, r, old, 0, old.EndOffset())
	checkCompacted(t, cl, all, old.EndOffset(), false)
	// The session goes on with the new manifest.
	rest, _ := readRemote(t, r, swapped, resume, swapped.EndOffset())
	session := append(firstPart, rest...)
	checkCompacted(t, cl, session, swapped.EndOffset(), false)
	after, _ := readRemote(t, r, swapped, 0, swapped.EndOffset())
	checkCompacted(t, cl, after, swapped.EndOffset(), true)
	if len(after) >= len(all) {
		t.Errorf("cleaned remote log has %d records, the old one %d", len(after), len(all))
	}
}

// TestRemoteCleanDropsTombstones: with delete.retention.ms=0, the remote
// cleaner drops tombstones whose delete horizon passed, and every older
// value of their keys with them.
func TestRemoteCleanDropsTombstones(t *testing.T) {
	cl := newCompactLog(t, 30)
	store := newMemStore()
	cfg := compactArchiverConfig(t, cl, store)
	cfg.Compaction.DeleteRetentionMs = 0
	a := newCompactArchiver(t, cfg, cl.gate, false, nil)
	a.BecomeLeader(1)
	var want int64
	for range 3 {
		cl.produce(150)
		want = cl.cleanedEnd(cl.cleanWith(0))
		waitUploaded(t, a, want)
	}
	var m *Manifest
	waitFor(t, 60*time.Second, "the remote cleaner to cover the remote log", func() bool {
		m = a.Manifest()
		st := a.RemoteCleanStats()
		return st.Rounds > 0 && st.CheckpointOffset >= m.EndOffset() && st.TombstonesRemoved > 0
	})
	// One more round over everything, after every horizon passed.
	rounds := a.RemoteCleanStats().Rounds
	cl.produce(60)
	waitUploaded(t, a, cl.cleanedEnd(cl.cleanWith(0)))
	waitFor(t, 60*time.Second, "another remote cleaning", func() bool {
		m = a.Manifest()
		st := a.RemoteCleanStats()
		return st.Rounds > rounds && st.CheckpointOffset >= m.EndOffset()
	})
	r := newTestReader(t, store, ReaderConfig{ChunkBytes: 1024})
	recs, _ := readRemote(t, r, m, 0, m.EndOffset())
	seen := map[string]bool{}
	for _, rec := range recs {
		if rec.value == nil {
			t.Errorf("tombstone of %s at %d survived", rec.key, rec.offset)
		}
		seen[rec.key] = true
	}
	for k, off := range cl.latest(m.EndOffset()) {
		cl.mu.Lock()
		kv := cl.produced[off]
		cl.mu.Unlock()
		if kv.value == nil && seen[k] {
			t.Errorf("key %s deleted at %d still has a value", k, off)
		}
		if kv.value != nil && !seen[k] {
			t.Errorf("key %s lost its latest value at %d", k, off)
		}
	}
	t.Logf("remote cleaner: %+v", a.RemoteCleanStats())
}

// TestCompactedDeleteVetoReachesNextBase: a local segment the cleaner
// emptied (or cut short) may be deleted only once the remote log reaches
// the next local segment's base, where the local log then starts.
func TestCompactedDeleteVetoReachesNextBase(t *testing.T) {
	cl := newCompactLog(t, 4)
	cl.produce(200)
	ckpt := cl.clean()
	segs := cl.log.Segments()
	if segs[0].Size != 0 || len(segs) < 3 {
		t.Fatalf("first segment %+v of %d, want one the cleaner emptied", segs[0], len(segs))
	}
	cfg := compactArchiverConfig(t, cl, newMemStore())
	cfg.RemoteClean.Disabled = true
	a, err := NewArchiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	// Before the manifest reaches past the emptied segment: vetoed.
	a.mu.manifest = NewManifest(testTopic, testTopicID, testPartition)
	if a.CanDeleteLocal(segs[0]) {
		t.Fatalf("emptied segment %+v deletable with nothing remote", segs[0])
	}
	cl.gate.Attach(a)
	a.Start()
	a.BecomeLeader(1)
	waitUploaded(t, a, cl.cleanedEnd(ckpt))
	m := a.Manifest()
	for _, s := range cl.log.Segments() {
		next := nextLocalBase(cl.log.Segments(), s)
		if got, want := a.CanDeleteLocal(s), s.Sealed && next <= m.EndOffset(); got != want {
			t.Errorf("segment [%d, %d) next base %d, remote end %d: deletable %v, want %v", s.BaseOffset, s.NextOffset, next, m.EndOffset(), got, want)
		}
	}
	if m.LogStartOffset != 0 {
		t.Errorf("remote log starts at %d, want 0", m.LogStartOffset)
	}
}

// TestUploadsGoOnDuringRemoteClean: a remote cleaning's reads and
// uploads do not hold up uploads of new segments; its swap then lands
// in the newer manifest, keeping the segments uploaded meanwhile.
func TestUploadsGoOnDuringRemoteClean(t *testing.T) {
	cl := newCompactLog(t, 40)
	cl.produce(250)
	ckpt := cl.clean()
	store := newMemStore()
	cfg := compactArchiverConfig(t, cl, store)
	cfg.RemoteClean.Interval = time.Hour
	a := newCompactArchiver(t, cfg, cl.gate, true, nil)
	a.BecomeLeader(1)
	waitUploaded(t, a, cl.cleanedEnd(ckpt))
	_ = a.Close()

	var b *Archiver
	entered, release := make(chan int64, 1), make(chan struct{})
	var once sync.Once
	hook := func() error {
		once.Do(func() {
			entered <- b.Manifest().EndOffset()
			<-release
		})
		return nil
	}
	cfg.RemoteClean.Interval = 10 * time.Millisecond
	b = newCompactArchiver(t, cfg, cl.gate, false, hook)
	b.BecomeLeader(1)
	var endAtRound int64
	select {
	case endAtRound = <-entered:
	case <-time.After(60 * time.Second):
		t.Fatal("no remote cleaning started")
	}
	cl.produce(250)
	want := cl.cleanedEnd(cl.clean())
	waitUploaded(t, b, want) // while the cleaning waits before its commit
	close(release)
	waitFor(t, 60*time.Second, "the swap committed", func() bool { return b.RemoteCleanStats().Rounds > 0 })
	m := b.Manifest()
	if m.EndOffset() < want || want <= endAtRound {
		t.Fatalf("remote end %d, uploaded %d meanwhile, %d when the cleaning uploaded", m.EndOffset(), want, endAtRound)
	}
	r := newTestReader(t, store, ReaderConfig{ChunkBytes: 1024})
	recs, _ := readRemote(t, r, m, 0, m.EndOffset())
	checkCompacted(t, cl, recs, m.EndOffset(), false)
}

// checkRemoteIndexes checks every live segment's offset index against
// its .log object: each entry names the position of a batch starting at
// BaseOffset plus its relative offset; and every time index entry lies in
// the segment.
func checkRemoteIndexes(t *testing.T, store ObjectStore, m *Manifest) {
	t.Helper()
	get := func(key string) []byte {
		rc, err := store.Get(testCtx(t), key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i := range m.Segments {
		s := &m.Segments[i]
		logb := get(m.SegmentKey(s, SuffixLog))
		starts := map[int64]int64{} // position -> base offset
		pos := int64(0)
		if err := segment.SplitBatches(logb, func(h segment.Header, b []byte) error {
			starts[pos] = h.BaseOffset
			if h.BaseOffset < s.BaseOffset || h.NextOffset() > s.NextOffset {
				t.Errorf("segment [%d, %d): batch [%d, %d) outside it", s.BaseOffset, s.NextOffset, h.BaseOffset, h.NextOffset())
			}
			pos += int64(len(b))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		ix := segment.OffsetIndex(get(m.SegmentKey(s, SuffixIndex))).Valid()
		for j := range ix.Len() {
			e := ix.Entry(j)
			if got, ok := starts[int64(e.Position)]; !ok || got != s.BaseOffset+int64(e.RelOffset) {
				t.Errorf("segment [%d, %d): index entry %d names offset %d at %d, the batch there starts at %d (%v)",
					s.BaseOffset, s.NextOffset, j, s.BaseOffset+int64(e.RelOffset), e.Position, got, ok)
			}
		}
		ti := segment.TimeIndex(get(m.SegmentKey(s, SuffixTimeIndex))).Valid()
		for j := range ti.Len() {
			if e := ti.Entry(j); s.BaseOffset+int64(e.RelOffset) >= s.NextOffset || e.Timestamp > s.MaxTimestamp {
				t.Errorf("segment [%d, %d): time index entry %d %+v outside it", s.BaseOffset, s.NextOffset, j, e)
			}
		}
	}
}

// TestRemoteCleanFoldsEmptyGroups: remote segments whose every record a
// later upload supersedes keep no record; their offsets are folded into
// the next replacement, whose indexes are relative to its lowered base.
func TestRemoteCleanFoldsEmptyGroups(t *testing.T) {
	cl := newCompactLog(t, 40)
	store := newMemStore()
	cfg := compactArchiverConfig(t, cl, store)
	cfg.RemoteClean.Interval = time.Hour
	cfg.Compaction.SegmentBytes = 1 // one source segment a group
	// Index entries in every replacement, however small.
	defer func(v int64) { remoteCleanIndexInterval = v }(remoteCleanIndexInterval)
	remoteCleanIndexInterval = 64
	a := newCompactArchiver(t, cfg, cl.gate, true, nil)
	a.BecomeLeader(1)
	for range 3 {
		cl.produce(120)
		waitUploaded(t, a, cl.cleanedEnd(cl.clean()))
	}
	_ = a.Close()
	old := a.Manifest()
	checkRemoteIndexes(t, store, old)

	cfg.RemoteClean.Interval = 10 * time.Millisecond
	b := newCompactArchiver(t, cfg, cl.gate, false, nil)
	b.BecomeLeader(1)
	waitFor(t, 60*time.Second, "a remote cleaning", func() bool { return b.RemoteCleanStats().Rounds > 0 })
	_ = b.Close()
	m := b.Manifest()
	if m.Segments[0].BaseOffset != old.Segments[0].BaseOffset || m.EndOffset() != old.EndOffset() {
		t.Fatalf("remote log [%d, %d) became [%d, %d)", old.Segments[0].BaseOffset, old.EndOffset(), m.Segments[0].BaseOffset, m.EndOffset())
	}
	checkRemoteIndexes(t, store, m)
	r := newTestReader(t, store, ReaderConfig{ChunkBytes: 1024})
	for _, maxBytes := range []int{1, 300, 5000} {
		var recs []remoteRecord
		for off := int64(0); off < m.EndOffset(); {
			rs, err := r.Read(context.Background(), PartitionKey{Topic: testTopic, Partition: testPartition}, m, off, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := rs.Copy()
			rs.Release()
			_ = segment.SplitBatches(b, func(h segment.Header, batch []byte) error {
				rr, err := segment.Records(batch)
				for _, rec := range rr {
					if rec.Offset >= off {
						recs = append(recs, remoteRecord{rec.Offset, string(rec.Key), rec.Value})
					}
				}
				return err
			})
			if rs.NextOffset <= off {
				t.Fatalf("read at %d does not advance", off)
			}
			off = rs.NextOffset
		}
		checkCompacted(t, cl, recs, m.EndOffset(), true)
	}
	first := m.Segments[0]
	t.Logf("first replacement [%d, %d), %d bytes; %d segments replaced by %d", first.BaseOffset, first.NextOffset, first.Size, len(old.Segments), len(m.Segments))
}

// TestRemoteCleanRebasesAfterEmptyGroups builds a remote log by hand
// (segments uploaded as written, not cleaned locally): the first
// segments hold only keys a later segment supersedes, so their groups
// keep nothing and the next replacement starts at their base, its index
// relative to that base.
func TestRemoteCleanRebasesAfterEmptyGroups(t *testing.T) {
	defer func(v int64) { remoteCleanIndexInterval = v }(remoteCleanIndexInterval)
	remoteCleanIndexInterval = 64
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = 1024
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	l, err := segment.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	produced := map[int64]keyedValue{}
	appendKeys := func(keys ...string) {
		var recs []segment.Record
		for _, k := range keys {
			recs = append(recs, segment.Record{Timestamp: time.Now().UnixMilli(), Key: []byte(k), Value: []byte(k + "-" + strings.Repeat("v", 30))})
		}
		b, err := segment.BuildBatch(segment.BatchSpec{Records: recs})
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Append(b, segment.AppendOptions{LeaderEpoch: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			produced[res.BaseOffset+int64(i)] = keyedValue{k, recs[i].Value}
		}
	}
	for i := range 30 {
		appendKeys(fmt.Sprintf("a%d", i%5), fmt.Sprintf("a%d", (i+1)%5))
	}
	for i := range 40 {
		appendKeys(fmt.Sprintf("b%02d", i))
	}
	for i := range 5 {
		appendKeys(fmt.Sprintf("a%d", i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	store := newMemStore()
	m := NewManifest(testTopic, testTopicID, testPartition)
	m.LeaderEpoch = 1
	for _, si := range l.Segments() {
		if si.Size == 0 {
			continue
		}
		rs := RemoteSegment{BaseOffset: si.BaseOffset, NextOffset: si.NextOffset, Size: si.Size, MaxTimestamp: si.MaxTimestamp, Epoch: 1, ID: newObjectID(), LeaderEpochs: si.LeaderEpochs}
		store.put(m.SegmentKey(&rs, SuffixLog), mustRead(t, si.LogPath))
		store.put(m.SegmentKey(&rs, SuffixIndex), mustRead(t, si.IndexPath))
		store.put(m.SegmentKey(&rs, SuffixTimeIndex), mustRead(t, si.TimeIndexPath))
		m.Segments = append(m.Segments, rs)
	}
	if _, err := CommitManifest(testCtx(t), store, m, ""); err != nil {
		t.Fatal(err)
	}
	cl := &compactLog{t: t, produced: produced}
	acfg := ArchiverConfig{Store: store, Log: l, Topic: testTopic, TopicID: testTopicID, Partition: testPartition,
		Compaction:  Compaction{Enabled: true, DeleteRetentionMs: 3600_000, SegmentBytes: 1},
		RemoteClean: RemoteCleanConfig{TempDir: t.TempDir(), MapBytes: 1 << 16}}
	a, err := NewArchiver(acfg)
	if err != nil {
		t.Fatal(err)
	}
	om, err := segment.NewOffsetMap(1<<16, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	var res remoteCleanResult
	k, outs, mappedEnd, _, err := a.remoteCleanRound(testCtx(t), remoteCleanWork{a: a, m: m, epoch: 1, comp: acfg.Compaction,
		plan: remoteCleanPlan{first: 0, end: len(m.Segments)}, om: om}, &res)
	if err != nil {
		t.Fatal(err)
	}
	if k != len(m.Segments) || mappedEnd != m.EndOffset() || outs[0].BaseOffset != 0 {
		t.Fatalf("rewrote %d of %d segments to %d, first from %d", k, len(m.Segments), mappedEnd, outs[0].BaseOffset)
	}
	next := m.Clone()
	next.Segments = outs
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	checkRemoteIndexes(t, store, next)
	r := newTestReader(t, store, ReaderConfig{ChunkBytes: 1024})
	for _, maxBytes := range []int{1, 200} {
		var recs []remoteRecord
		for off := int64(0); off < next.EndOffset(); {
			rs, err := r.Read(testCtx(t), PartitionKey{Topic: testTopic, Partition: testPartition}, next, off, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := rs.Copy()
			rs.Release()
			_ = segment.SplitBatches(b, func(h segment.Header, batch []byte) error {
				rr, err := segment.Records(batch)
				for _, rec := range rr {
					if rec.Offset >= off {
						recs = append(recs, remoteRecord{rec.Offset, string(rec.Key), rec.Value})
					}
				}
				return err
			})
			if rs.NextOffset <= off {
				t.Fatalf("read at %d does not advance", off)
			}
			off = rs.NextOffset
		}
		checkCompacted(t, cl, recs, next.EndOffset(), true)
	}
	t.Logf("%d segments rewritten to %d; first [%d, %d) %d bytes", k, len(outs), outs[0].BaseOffset, outs[0].NextOffset, outs[0].Size)
}
