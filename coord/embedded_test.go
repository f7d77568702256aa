package coord

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func openTest(t *testing.T, dir string) (*Embedded, bool) {
	t.Helper()
	e, existed, err := OpenEmbedded(dir, Broker{ID: 1, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, existed
}

func TestEmbeddedPersists(t *testing.T) {
	dir := t.TempDir()
	e, existed := openTest(t, dir)
	if existed {
		t.Fatal("fresh dir reported as existing")
	}
	cid := e.ClusterID()
	if len(cid) != 22 {
		t.Fatalf("cluster id %q: got length %d, want 22", cid, len(cid))
	}
	id := NewTopicID()
	p := Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}
	if err := e.CreateTopic(Topic{Name: "a", ID: id, Partitions: []Partition{p}, Configs: map[string]string{"retention.ms": "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic(Topic{Name: "a", ID: NewTopicID(), Partitions: []Partition{p}}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate create: got %v, want ErrTopicExists", err)
	}
	if err := e.CreateTopic(Topic{Name: "b", ID: NewTopicID(), Partitions: []Partition{p}}); err != nil {
		t.Fatal(err)
	}
	if err := e.AddPartitions("a", []Partition{p, p}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetTopicConfig("a", map[string]string{"segment.bytes": "1000"}); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteTopic("b"); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteTopic("b"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("second delete: got %v, want ErrUnknownTopic", err)
	}
	want := e.Topics()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e2, existed := openTest(t, dir)
	if !existed {
		t.Fatal("reopen: file not found")
	}
	if e2.ClusterID() != cid {
		t.Fatalf("cluster id: got %q, want %q", e2.ClusterID(), cid)
	}
	got := e2.Topics()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("topics after reopen:\ngot  %+v\nwant %+v", got, want)
	}
	if len(got) != 1 || got[0].ID != id || len(got[0].Partitions) != 3 || got[0].Configs["segment.bytes"] != "1000" || len(got[0].Configs) != 1 {
		t.Fatalf("unexpected topics %+v", got)
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != MetadataFile {
		t.Fatalf("dir holds %v, want only %s", ents, MetadataFile)
	}
}

func TestEmbeddedReturnsCopies(t *testing.T) {
	e, _ := openTest(t, t.TempDir())
	if err := e.CreateTopic(Topic{Name: "a", ID: NewTopicID(), Partitions: []Partition{{Replicas: []int32{1}}}}); err != nil {
		t.Fatal(err)
	}
	tp, _ := e.Topic("a")
	tp.Partitions[0].Replicas[0] = 7
	tp.Configs["x"] = "y"
	tp2, _ := e.Topic("a")
	if tp2.Partitions[0].Replicas[0] != 1 || len(tp2.Configs) != 0 {
		t.Fatalf("caller's change leaked into the coordinator: %+v", tp2)
	}
}

func TestEmbeddedRejectsBadFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, MetadataFile), []byte(`{"version": 99, "cluster_id": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenEmbedded(dir, Broker{}); err == nil {
		t.Fatal("opened a file of an unknown version")
	}
}

func TestTopicIDRoundTrip(t *testing.T) {
	for i := 0; i < 100; i++ {
		id := NewTopicID()
		got, err := ParseTopicID(id.String())
		if err != nil || got != id {
			t.Fatalf("#%d: got %v %v, want %v", i, got, err, id)
		}
		if id[6]>>4 != 4 {
			t.Fatalf("#%d: %s is not a version 4 UUID", i, id)
		}
	}
	for _, bad := range []string{"", "x", "00000000-0000-0000-0000-00000000000g", "000000000000-0000-0000-000000000000"} {
		if _, err := ParseTopicID(bad); err == nil {
			t.Fatalf("parsed malformed id %q", bad)
		}
	}
}
