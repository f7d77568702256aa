package tiering

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stratastream/strata/broker/producer"
)

func TestRestoreListing(t *testing.T) {
	s := newTestLocalStore(t)
	tl := newTestLog(t, testSegBytes)
	tl.produce(50)
	a := newTestArchiver(t, tl, s, nil)
	a.BecomeLeader(1)
	waitUploaded(t, a, tl.sealedEnd())
	// Another topic, written directly.
	other := testManifest(2)
	if _, err := CommitManifest(testCtx(t), s, other, ""); err != nil {
		t.Fatal(err)
	}

	names, err := ListRemoteTopics(testCtx(t), s)
	if err != nil || !reflect.DeepEqual(names, []string{testTopic, "orders"}) {
		t.Fatalf("topics %v, %v", names, err)
	}
	var calls int
	rt, err := LoadRemoteTopic(testCtx(t), s, testTopic, func(done, total int) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if rt.Name != testTopic || rt.TopicID != testTopicID || rt.NumPartitions != 3 || rt.Configs["remote.storage.enable"] != "true" ||
		len(rt.Partitions) != 1 || rt.Partitions[0].Partition != testPartition || calls != 1 {
		t.Fatalf("remote topic %+v", rt)
	}
	m := rt.Partitions[0].Manifest
	off, data, ok, err := FetchProducerSnapshot(testCtx(t), s, m)
	if err != nil || !ok || off != m.EndOffset() {
		t.Fatalf("snapshot at %d ok=%v: %v", off, ok, err)
	}
	want, err := os.ReadFile(filepath.Join(tl.log.Dir(), producer.SnapshotFileName(off)))
	if err != nil || !bytes.Equal(data, want) {
		t.Fatalf("snapshot differs: %v", err)
	}
	if _, err := LoadRemoteTopic(testCtx(t), s, "missing", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing topic: %v", err)
	}
	if ort, err := LoadRemoteTopic(testCtx(t), s, "orders", nil); err != nil || ort.NumPartitions != 4 || ort.Partitions[0].Partition != 2 {
		t.Fatalf("orders: %+v %v", ort, err)
	}
}
