package tiering

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
	"github.com/stratastream/strata/tiering/miniotest"
)

const (
	testTopic     = "events"
	testTopicID   = "0a1b2c3d-0000-4000-8000-00000000e001"
	testPartition = int32(1)
	testPrefix    = testTopic + "/" + testTopicID + "/1/"
	testSegBytes  = 2048 // about a dozen batches per segment
)

// testLog is a real segment.Log wired to a Gate, as the broker wires it,
// with the producer state snapshotted at every seal.
type testLog struct {
	t        *testing.T
	log      *segment.Log
	gate     *Gate
	producer *producer.StateManager
	epoch    int32
	prefix   string // of the values produce writes; "value" when empty

	mu       sync.Mutex
	produced map[int64]string // offset -> value of every record appended
	seq      int32
}

// newTestLog opens a log in a fresh directory with tiny segments and local
// retention of one byte: everything uploaded may go.
func newTestLog(t *testing.T, segBytes int64) *testLog {
	t.Helper()
	tl := &testLog{t: t, gate: NewGate(true), producer: producer.NewStateManager(0), epoch: 1, produced: map[int64]string{}}
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = segBytes
	cfg.FileDeleteDelayMs = 0
	cfg = Retention{Ms: -1, Bytes: -1, LocalMs: -2, LocalBytes: 0}.LocalConfig(cfg, true)
	dir := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d", testTopic, testPartition))
	// The snapshot is written before the gate wakes the archiver.
	opts := append([]segment.Option{segment.WithOnSeal(tl.snapshot)}, tl.gate.SegmentOptions()...)
	l, err := segment.Open(dir, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	tl.log = l
	return tl
}

// snapshot writes the producer state at a sealed segment's end, as the
// broker's periodic snapshots would (kept all, no pruning).
func (tl *testLog) snapshot(si segment.SegmentInfo) {
	data, err := tl.producer.EncodeSnapshot(si.NextOffset)
	if err != nil {
		tl.t.Errorf("snapshot at %d: %v", si.NextOffset, err)
		return
	}
	if err := os.WriteFile(filepath.Join(tl.log.Dir(), producer.SnapshotFileName(si.NextOffset)), data, 0o644); err != nil {
		tl.t.Errorf("snapshot: %v", err)
	}
}

// produce appends n one-record batches from an idempotent producer.
func (tl *testLog) produce(n int) {
	tl.t.Helper()
	for range n {
		tl.mu.Lock()
		off := tl.log.LogEndOffset()
		prefix := cmp.Or(tl.prefix, "value")
		val := fmt.Sprintf("%s-%08d-%s", prefix, off, bytes.Repeat([]byte{'x'}, 105-len(prefix)))
		b, err := segment.BuildBatch(segment.BatchSpec{
			Idempotent: true, ProducerID: 7, BaseSequence: tl.seq,
			Records: []segment.Record{{Timestamp: time.Now().UnixMilli(), Key: []byte("k"), Value: []byte(val)}},
		})
		if err != nil {
			tl.mu.Unlock()
			tl.t.Fatal(err)
		}
		res, err := tl.log.Append(b, segment.AppendOptions{LeaderEpoch: tl.epoch})
		if err != nil {
			tl.mu.Unlock()
			tl.t.Fatal(err)
		}
		h, _ := segment.ParseHeader(b)
		tl.producer.Update(h, res.BaseOffset)
		tl.produced[res.BaseOffset] = val
		tl.seq++
		tl.mu.Unlock()
	}
}

// sealedEnd is the NextOffset of the newest sealed segment.
func (tl *testLog) sealedEnd() int64 {
	segs := tl.log.Segments()
	end := int64(0)
	for _, s := range segs {
		if s.Sealed {
			end = s.NextOffset
		}
	}
	return end
}

// newTestArchiver makes an archiver of tl on store, attached to its gate,
// started; Close runs at cleanup.
func newTestArchiver(t *testing.T, tl *testLog, store ObjectStore, tweak func(*ArchiverConfig)) *Archiver {
	t.Helper()
	cfg := ArchiverConfig{
		Store: store, Log: tl.log, Topic: testTopic, TopicID: testTopicID, Partition: testPartition,
		NumPartitions: 3, Configs: map[string]string{"remote.storage.enable": "true"},
		Retention:    RemoteRetention{Ms: -1, Bytes: -1},
		PollInterval: 20 * time.Millisecond, RefreshInterval: 200 * time.Millisecond,
		RetryMin: 20 * time.Millisecond, RetryMax: 300 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	a, err := NewArchiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tl.gate.Attach(a)
	a.Start()
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitSteps makes the archiver's loop run n more steps, waking it for
// each (a step in progress when one starts counts as the first).
func waitSteps(t *testing.T, a *Archiver, n int) {
	t.Helper()
	for range n {
		done := a.steps.Load()
		a.Notify()
		waitFor(t, 20*time.Second, "an archiver step", func() bool { return a.steps.Load() > done })
	}
}

// waitUploaded waits until the archiver's manifest reaches offset.
func waitUploaded(t *testing.T, a *Archiver, offset int64) {
	t.Helper()
	waitUploadedWithin(t, a, offset, 60*time.Second)
}

// waitUploadedWithin is waitUploaded with its bound.
func waitUploadedWithin(t *testing.T, a *Archiver, offset int64, timeout time.Duration) {
	t.Helper()
	if poll.For(timeout, func() bool {
		m := a.Manifest()
		return m != nil && m.EndOffset() >= offset
	}) {
		return
	}
	// Once seen in CI (TestArchiverMinIOOutage after MinIO's restart, no
	// step logged for a minute): say where the archiver is.
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	t.Fatalf("timed out after %v waiting for remote end %d; steps %d, lag %+v\ngoroutines:\n%s", timeout, offset, a.steps.Load(), a.Lag(), buf)
}

// objectReader reads a whole object, possibly with another client than
// the store under test.
type objectReader func(t *testing.T, key string) []byte

func storeReader(s ObjectStore) objectReader {
	return func(t *testing.T, key string) []byte {
		t.Helper()
		return mustGet(t, s, key, 0, -1)
	}
}

func minioReader(m *miniotest.Server, bucket, prefix string) objectReader {
	return func(t *testing.T, key string) []byte {
		t.Helper()
		return minioRead(t, m, bucket, prefix+key)
	}
}

// checkRemoteMatchesLocal compares every remote segment that is still
// local with its files, byte for byte, read with read.
func checkRemoteMatchesLocal(t *testing.T, tl *testLog, m *Manifest, read objectReader) {
	t.Helper()
	local := map[int64]segment.SegmentInfo{}
	for _, s := range tl.log.Segments() {
		local[s.BaseOffset] = s
	}
	compared := 0
	for i := range m.Segments {
		rs := &m.Segments[i]
		ls, ok := local[rs.BaseOffset]
		if !ok {
			continue
		}
		if ls.NextOffset != rs.NextOffset || ls.Size != rs.Size || ls.MaxTimestamp != rs.MaxTimestamp {
			t.Errorf("segment %d: remote %+v, local %+v", rs.BaseOffset, rs, ls)
		}
		for _, f := range []struct{ suffix, path string }{
			{SuffixLog, ls.LogPath}, {SuffixIndex, ls.IndexPath}, {SuffixTimeIndex, ls.TimeIndexPath},
			{SuffixSnapshot, filepath.Join(tl.log.Dir(), producer.SnapshotFileName(rs.NextOffset))},
		} {
			want, err := os.ReadFile(f.path)
			if err != nil {
				t.Fatal(err)
			}
			if got := read(t, m.SegmentKey(rs, f.suffix)); !bytes.Equal(got, want) {
				t.Errorf("segment %d %s: remote object (%d bytes) differs from %s (%d bytes)", rs.BaseOffset, f.suffix, len(got), f.path, len(want))
			}
		}
		if !rs.HasSnapshot {
			t.Errorf("segment %d: no producer snapshot uploaded", rs.BaseOffset)
		}
		compared++
	}
	if compared == 0 {
		t.Error("no remote segment is still local to compare with")
	}
}

// checkAllRecords reads the whole partition, remote segments from the
// store with read and the rest from the local log, and checks that every
// produced record is there, in order, with its value.
func checkAllRecords(t *testing.T, tl *testLog, m *Manifest, read objectReader) {
	t.Helper()
	var buf []byte
	for i := range m.Segments {
		buf = append(buf, read(t, m.SegmentKey(&m.Segments[i], SuffixLog))...)
	}
	for off := max(m.EndOffset(), tl.log.LogStartOffset()); off < tl.log.LogEndOffset(); {
		b, err := tl.log.ReadCopy(off, 1<<20, tl.log.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Fatalf("empty local read at %d", off)
		}
		buf = append(buf, b...)
		var last segment.Header
		if err := segment.SplitBatches(b, func(h segment.Header, _ []byte) error { last = h; return nil }); err != nil {
			t.Fatal(err)
		}
		off = last.NextOffset()
	}
	next := m.LogStartOffset
	if len(m.Segments) > 0 {
		next = m.Segments[0].BaseOffset
	}
	err := segment.SplitBatches(buf, func(h segment.Header, batch []byte) error {
		recs, err := segment.Records(batch)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.Offset != next {
				return fmt.Errorf("record at offset %d, want %d", r.Offset, next)
			}
			tl.mu.Lock()
			want := tl.produced[r.Offset]
			tl.mu.Unlock()
			if string(r.Value) != want {
				return fmt.Errorf("offset %d: value %q, want %q", r.Offset, r.Value, want)
			}
			next++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next != tl.log.LogEndOffset() {
		t.Fatalf("read up to %d, log end %d", next, tl.log.LogEndOffset())
	}
}

// checkManifestMatchesLog checks the manifest's segments against the local
// log's: contiguous from the first, epochs from the log's cache.
func checkManifest(t *testing.T, m *Manifest, epoch int32) {
	t.Helper()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if m.Topic != testTopic || m.Partition != testPartition || m.TopicID != testTopicID || m.NumPartitions != 3 ||
		m.Configs["remote.storage.enable"] != "true" || m.LeaderEpoch != epoch {
		t.Errorf("manifest header %+v", m)
	}
	for _, s := range m.Segments {
		if len(s.LeaderEpochs) == 0 || s.LeaderEpochs[0].StartOffset != s.BaseOffset || s.Epoch != epoch {
			t.Errorf("segment %d: epochs %v, uploader %d", s.BaseOffset, s.LeaderEpochs, s.Epoch)
		}
	}
}

func testArchiverUploads(t *testing.T, store ObjectStore, read objectReader) {
	tl := newTestLog(t, testSegBytes)
	tl.produce(150)
	before, err := tl.log.EnforceRetention()
	if err != nil || len(before) != 0 {
		t.Fatalf("retention before any upload deleted %d segments: %v", len(before), err)
	}
	a := newTestArchiver(t, tl, store, nil)
	a.BecomeLeader(1)
	end := tl.sealedEnd()
	waitUploaded(t, a, end)
	m := a.Manifest()
	if len(m.Segments) < 8 || m.Segments[0].BaseOffset != 0 || m.LogStartOffset != 0 {
		t.Fatalf("manifest: %d segments from %d", len(m.Segments), m.LogStartOffset)
	}
	checkManifest(t, m, 1)
	checkRemoteMatchesLocal(t, tl, m, read)
	// The stored manifest is the archiver's view.
	stored, _, err := LoadManifest(testCtx(t), store, testTopic, testTopicID, testPartition)
	if err != nil || stored.EndOffset() != m.EndOffset() {
		t.Fatalf("stored manifest: %v", err)
	}

	// Local retention now deletes what is uploaded, and only that.
	deleted, err := tl.log.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) == 0 {
		t.Fatal("nothing deleted after upload")
	}
	for _, d := range deleted {
		if d.NextOffset > m.EndOffset() {
			t.Errorf("deleted segment [%d, %d) beyond the remote end %d", d.BaseOffset, d.NextOffset, m.EndOffset())
		}
	}
	checkAllRecords(t, tl, m, read)

	// More data rolls more segments; they follow.
	tl.produce(60)
	waitUploaded(t, a, tl.sealedEnd())
	m = a.Manifest()
	checkManifest(t, m, 1)
	checkAllRecords(t, tl, m, read)
	lag := a.Lag()
	if !lag.Known || lag.SegmentsPending != 0 || lag.BytesPending != 0 || lag.UploadedSegs != int64(len(m.Segments)) ||
		lag.RemoteEnd != m.EndOffset() || lag.LastUpload.IsZero() || lag.LastError != nil || !lag.Leader {
		t.Errorf("lag %+v", lag)
	}
}

func TestArchiverUploadsLocal(t *testing.T) {
	s := newTestLocalStore(t)
	testArchiverUploads(t, s, storeReader(s))
}

func TestArchiverUploadsMinIO(t *testing.T) {
	m := miniotest.Start(t)
	s, bucket := newS3Store(t, m, nil)
	testArchiverUploads(t, s, minioReader(m, bucket, "strata/test/"))
}

// TestArchiverFollowerAndLag: a follower uploads nothing but learns the
// leader's manifest, so its veto follows the leader's uploads; lag counts
// what is sealed and not remote. The follower's clock runs a minute ahead,
// so its pending segments are that old.
func TestArchiverFollowerAndLag(t *testing.T) {
	s := newTestLocalStore(t)
	tl := newTestLog(t, testSegBytes)
	tl.produce(80)
	f := newTestArchiver(t, tl, s, func(c *ArchiverConfig) {
		c.Now = func() time.Time { return time.Now().Add(time.Minute) }
	})
	waitFor(t, 20*time.Second, "follower loads the manifest", func() bool { return f.Manifest() != nil })
	lag := f.Lag()
	if lag.Leader || lag.SegmentsPending < 4 || lag.BytesPending <= 0 || lag.OldestPending < time.Minute || lag.RemoteEnd != 0 {
		t.Fatalf("follower lag %+v", lag)
	}
	waitSteps(t, f, 3)
	if objs, _ := s.List(testCtx(t), ""); len(objs) != 0 {
		t.Fatalf("follower uploaded %d objects in 3 steps", len(objs))
	}
	// Another archiver (the leader, here on the same log) uploads; the
	// follower's veto lifts after its next refresh.
	tl2 := &testLog{t: t, log: tl.log, gate: NewGate(true)}
	leader := newTestArchiver(t, tl2, s, nil)
	leader.BecomeLeader(1)
	waitUploaded(t, leader, tl.sealedEnd())
	waitUploaded(t, f, tl.sealedEnd())
	if d, err := tl.log.EnforceRetention(); err != nil || len(d) == 0 {
		t.Fatalf("follower retention after upload: %d deleted, %v", len(d), err)
	}
	if l := f.Lag(); l.SegmentsPending != 0 || l.UploadedSegs != 0 {
		t.Fatalf("follower lag after the leader's upload %+v", l)
	}
}

// TestArchiverLostCommitAnswer: the manifest put succeeds but its answer is
// lost. The archiver reloads, finds its segment committed, and goes on
// without a duplicate or a gap.
func TestArchiverLostCommitAnswer(t *testing.T) {
	s := &faultStore{ObjectStore: newTestLocalStore(t)}
	lost := 0
	s.after = func(op, key string) error {
		if op == "put" && filepath.Base(key) == manifestName && lost < 3 {
			lost++
			return fmt.Errorf("%w: answer lost", ErrUnavailable)
		}
		return nil
	}
	tl := newTestLog(t, testSegBytes)
	tl.produce(100)
	a := newTestArchiver(t, tl, s, nil)
	a.BecomeLeader(1)
	waitUploaded(t, a, tl.sealedEnd())
	m := a.Manifest()
	checkManifest(t, m, 1)
	checkAllRecords(t, tl, m, storeReader(s))
	if a.Lag().LastError == nil {
		t.Error("no error recorded")
	}
}

// faultStore wraps a store with hooks: before fails an operation before it
// runs, after fails it after it ran (its effect stays, its answer is lost).
type faultStore struct {
	ObjectStore
	mu     sync.Mutex
	before func(op, key string) error
	after  func(op, key string) error
}

func (f *faultStore) hook(which *func(op, key string) error, op, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *which == nil {
		return nil
	}
	return (*which)(op, key)
}

func (f *faultStore) setBefore(fn func(op, key string) error) {
	f.mu.Lock()
	f.before = fn
	f.mu.Unlock()
}

func (f *faultStore) Put(ctx context.Context, key string, r io.Reader, size int64, cond PutCondition) (ObjectInfo, error) {
	if err := f.hook(&f.before, "put", key); err != nil {
		return ObjectInfo{}, err
	}
	info, err := f.ObjectStore.Put(ctx, key, r, size, cond)
	if err == nil {
		err = f.hook(&f.after, "put", key)
	}
	return info, err
}

func (f *faultStore) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := f.hook(&f.before, "get", key); err != nil {
		return nil, err
	}
	return f.ObjectStore.Get(ctx, key, off, length)
}

func (f *faultStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := f.hook(&f.before, "stat", key); err != nil {
		return ObjectInfo{}, err
	}
	return f.ObjectStore.Stat(ctx, key)
}

// testSegKey is the key of one of rs's objects in the test partition.
func testSegKey(rs *RemoteSegment, suffix string) string {
	return testPrefix + rs.ObjectName() + suffix
}
