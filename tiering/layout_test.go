package tiering

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
)

// testOtherID is the topic id of another incarnation of testTopic.
const testOtherID = "0a1b2c3d-0000-4000-8000-00000000e002"

func TestParseObjectKey(t *testing.T) {
	for i, tc := range []struct {
		key  string
		ok   bool
		want objectKey
	}{
		{"t/12/x", true, objectKey{topic: "t", partition: 12, name: "x"}},
		{"t/" + testTopicID + "/3/manifest", true, objectKey{topic: "t", topicID: testTopicID, partition: 3, name: "manifest"}},
		{"t/01/x", false, objectKey{}},                                     // not canonical
		{"t/-1/x", false, objectKey{}},                                     // negative
		{"t/12/", false, objectKey{}},                                      // no name
		{"/12/x", false, objectKey{}},                                      // no topic
		{"t/tid/3/x", false, objectKey{}},                                  // not a topic id
		{"t/" + strings.ToUpper(testTopicID) + "/3/x", false, objectKey{}}, // not canonical
		{"t/" + testTopicID + "/x", false, objectKey{}},                    // a topic id is no partition
		{"t/" + testTopicID + "/3/x/y", false, objectKey{}},
		{"x", false, objectKey{}},
	} {
		got, ok := parseObjectKey(tc.key)
		if ok != tc.ok || got != tc.want {
			t.Errorf("#%d: %q: got %+v %v, want %+v %v", i, tc.key, got, ok, tc.want, tc.ok)
		}
		if ok && !strings.HasPrefix(tc.key, got.prefix()) {
			t.Errorf("#%d: %q does not start with its prefix %q", i, tc.key, got.prefix())
		}
	}
	// No prefix of one layout is a prefix of a key of the other.
	if strings.HasPrefix(PartitionPrefix("t", testTopicID, 0), LegacyPartitionPrefix("t", 0)) ||
		strings.HasPrefix(LegacyPartitionPrefix("t", 0), PartitionPrefix("t", testTopicID, 0)) {
		t.Error("the layouts share a prefix")
	}
}

// openLegacyBucket copies testdata/legacy-bucket into a fresh local store.
// The archiver wrote it before the topic id joined the keys (generated
// with that version's code): a version 1 manifest of events/1 (topic id
// testTopicID, offsets [0, 44) in four segments of epoch 1, the records
// testLog produces) and its objects under events/1/.
func openLegacyBucket(t *testing.T) *LocalStore {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("testdata", "legacy-bucket")
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewLocalStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const legacyEnd = 44 // the remote end of testdata/legacy-bucket

// TestLegacyBucketRead: a bucket of the legacy layout is read as it is:
// the manifest (version 1) by the topic it records, every record from
// offset 0 through the remote reader, the producer snapshot, and restore's
// listing; another incarnation of the name does not see it.
func TestLegacyBucketRead(t *testing.T) {
	ctx := testCtx(t)
	s := openLegacyBucket(t)
	m, _, err := LoadManifest(ctx, s, testTopic, testTopicID, testPartition)
	if err != nil {
		t.Fatal(err)
	}
	if !m.LegacyKeys || m.Version != ManifestVersion || m.Prefix() != "events/1/" || m.LogStartOffset != 0 || m.EndOffset() != legacyEnd {
		t.Fatalf("legacy manifest: legacy %v version %d prefix %q [%d, %d)", m.LegacyKeys, m.Version, m.Prefix(), m.LogStartOffset, m.EndOffset())
	}
	r := newTestReader(t, s, ReaderConfig{})
	key := PartitionKey{Topic: testTopic, Partition: testPartition}
	next := int64(0)
	for off := int64(0); off < m.EndOffset(); {
		rs, err := r.Read(ctx, key, m, off, 1<<20)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		b, err := rs.Copy()
		rs.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := segment.SplitBatches(b, func(h segment.Header, batch []byte) error {
			recs, err := segment.Records(batch)
			for _, rec := range recs {
				if rec.Offset != next || !strings.HasPrefix(string(rec.Value), fmt.Sprintf("value-%08d-", next)) {
					return fmt.Errorf("record at %d: offset %d value %.20q", next, rec.Offset, rec.Value)
				}
				next++
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		off = rs.NextOffset
	}
	if next != legacyEnd {
		t.Fatalf("read %d records, want %d", next, legacyEnd)
	}
	if off, data, ok, err := FetchProducerSnapshot(ctx, s, m); err != nil || !ok || off != legacyEnd || len(data) == 0 {
		t.Fatalf("producer snapshot: at %d, %d bytes, %v, %v", off, len(data), ok, err)
	}
	if _, _, err := LoadManifest(ctx, s, testTopic, testOtherID, testPartition); !IsNotFound(err) {
		t.Fatalf("another incarnation loads the legacy manifest: %v", err)
	}
	names, err := ListRemoteTopics(ctx, s)
	if err != nil || len(names) != 1 || names[0] != testTopic {
		t.Fatalf("remote topics %v, %v", names, err)
	}
	rt, err := LoadRemoteTopic(ctx, s, testTopic, nil)
	if err != nil || rt.TopicID != testTopicID || rt.NumPartitions != 3 || len(rt.Partitions) != 1 ||
		!rt.Partitions[0].Manifest.LegacyKeys || rt.Configs["remote.storage.enable"] != "true" {
		t.Fatalf("remote topic %+v, %v", rt, err)
	}
}

// TestLegacyBucketLifecycle: the topic that owns a legacy partition goes
// on uploading there (version 2 manifest, same key); a new incarnation of
// the name writes under its own topic id and never touches it; deleting
// either incarnation deletes only its own data; the sweeper watches the
// legacy directory like any other.
func TestLegacyBucketLifecycle(t *testing.T) {
	ctx := testCtx(t)
	s := openLegacyBucket(t)

	// The owner continues: its local log holds the same records (the
	// same lineage, epoch 1) and more.
	tl := newTestLog(t, testSegBytes)
	tl.produce(legacyEnd + 1) // the record after seals the segment ending there
	if end := tl.sealedEnd(); end != legacyEnd {
		t.Fatalf("test log sealed up to %d, want the legacy remote end %d", end, legacyEnd)
	}
	tl.produce(30)
	a := newTestArchiver(t, tl, s, nil)
	a.BecomeLeader(2)
	waitUploaded(t, a, tl.sealedEnd())
	m := a.Manifest()
	if !m.LegacyKeys || m.Key() != LegacyManifestKey(testTopic, testPartition) || len(m.Segments) <= 4 {
		t.Fatalf("owner's manifest: legacy %v, key %s, %d segments", m.LegacyKeys, m.Key(), len(m.Segments))
	}
	raw := mustGet(t, s, LegacyManifestKey(testTopic, testPartition), 0, -1)
	if !bytes.Contains(raw, []byte(`"version":2`)) || !bytes.Contains(raw, []byte(`"legacy_keys":true`)) {
		t.Fatalf("stored manifest: %s", raw)
	}
	checkAllRecords(t, tl, m, storeReader(s))
	if objs, _ := s.List(ctx, testTopic+"/"+testTopicID+"/"); len(objs) != 0 {
		t.Fatalf("the owner of a legacy partition wrote %d objects in the new layout", len(objs))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	tl.gate.Detach(a)

	// A new incarnation of the name.
	tl2 := newTestLog(t, testSegBytes)
	tl2.produce(40)
	b := newTestArchiver(t, tl2, s, func(c *ArchiverConfig) { c.TopicID = testOtherID })
	b.BecomeLeader(0)
	waitUploaded(t, b, tl2.sealedEnd())
	m2 := b.Manifest()
	if m2.LegacyKeys || m2.Prefix() != PartitionPrefix(testTopic, testOtherID, testPartition) || m2.Segments[0].BaseOffset != 0 {
		t.Fatalf("new incarnation's manifest: legacy %v, prefix %s, first segment %d", m2.LegacyKeys, m2.Prefix(), m2.Segments[0].BaseOffset)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	legacyObjects := func() int {
		objs, err := s.List(ctx, LegacyPartitionPrefix(testTopic, testPartition))
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	before := legacyObjects()

	// Restore picks the newest incarnation and names the other.
	rt, err := LoadRemoteTopic(ctx, s, testTopic, nil)
	if err != nil || rt.TopicID != testOtherID || len(rt.OtherIDs) != 1 || rt.OtherIDs[0] != testTopicID {
		t.Fatalf("remote topic %+v, %v", rt, err)
	}

	// The sweeper keeps what the legacy manifest references and deletes
	// an orphan there after the grace period.
	orphan := "events/1/00000000000000000100-2-0bad.log"
	mustPut(t, s, orphan, []byte("orphan"), PutCondition{})
	clock := newFakeMono()
	sw := &Sweeper{Store: s, Grace: time.Minute, Mono: clock.now}
	if n, err := sw.SweepAll(ctx); n != 0 || err != nil {
		t.Fatalf("first sweep: %d, %v", n, err)
	}
	clock.advance(time.Minute)
	if n, err := sw.SweepAll(ctx); n != 1 || err != nil {
		t.Fatalf("sweep after the grace period: %d, %v; want the orphan", n, err)
	}
	if legacyObjects() != before {
		t.Fatalf("legacy objects: %d, want %d", legacyObjects(), before)
	}

	// Deleting the new incarnation leaves the legacy partition alone.
	if err := DeletePartition(ctx, s, testTopic, testOtherID, testPartition); err != nil {
		t.Fatal(err)
	}
	if objs, _ := s.List(ctx, PartitionPrefix(testTopic, testOtherID, testPartition)); len(objs) != 0 {
		t.Fatalf("%d objects of the deleted incarnation left", len(objs))
	}
	if legacyObjects() != before {
		t.Fatalf("deleting another incarnation touched the legacy partition: %d objects, want %d", legacyObjects(), before)
	}
	if got, _, err := LoadManifest(ctx, s, testTopic, testTopicID, testPartition); err != nil || got.EndOffset() != m.EndOffset() {
		t.Fatalf("legacy manifest after deleting another incarnation: %v", err)
	}
	checkAllRecords(t, tl, m, storeReader(s))

	// Deleting the owner deletes the legacy partition.
	if err := DeletePartition(ctx, s, testTopic, testTopicID, testPartition); err != nil {
		t.Fatal(err)
	}
	if n := legacyObjects(); n != 0 {
		t.Fatalf("%d legacy objects left after deleting their topic", n)
	}
}

// TestDeletePartitionByID: deleting an incarnation's remote data leaves
// another incarnation's (the same name, created after it) intact, also
// when the other one is written while the deletion runs.
func TestDeletePartitionByID(t *testing.T) {
	ctx := testCtx(t)
	s := newTestLocalStore(t)
	upload := func(id string) (*testLog, *Manifest) {
		tl := newTestLog(t, testSegBytes)
		tl.produce(40)
		a := newTestArchiver(t, tl, s, func(c *ArchiverConfig) { c.TopicID = id })
		a.BecomeLeader(1)
		waitUploaded(t, a, tl.sealedEnd())
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		tl.gate.Detach(a)
		return tl, a.Manifest()
	}
	upload(testTopicID)
	tl2, m2 := upload(testOtherID)
	if err := DeletePartition(ctx, s, testTopic, testTopicID, testPartition); err != nil {
		t.Fatal(err)
	}
	if objs, _ := s.List(ctx, PartitionPrefix(testTopic, testTopicID, testPartition)); len(objs) != 0 {
		t.Fatalf("%d objects of the deleted incarnation left", len(objs))
	}
	got, _, err := LoadManifest(ctx, s, testTopic, testOtherID, testPartition)
	if err != nil || got.EndOffset() != m2.EndOffset() {
		t.Fatalf("the other incarnation's manifest: %v", err)
	}
	checkAllRecords(t, tl2, got, storeReader(s))
	if err := DeletePartition(ctx, s, testTopic, testTopicID, testPartition); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if err := DeletePartition(ctx, s, testTopic, "tid", testPartition); err == nil {
		t.Fatal("delete with a malformed topic id accepted")
	}
}
