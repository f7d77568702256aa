package coord

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLocalReadsEmbeddedFile: the embedded coordinator takes over the data
// directory of the single-node broker (Embedded, format 1).
func TestLocalReadsEmbeddedFile(t *testing.T) {
	dir := t.TempDir()
	e, _, err := OpenEmbedded(dir, Broker{ID: 1, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatal(err)
	}
	id := NewTopicID()
	if err := e.CreateTopic(Topic{Name: "old", ID: id, Partitions: []Partition{{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 4}}, Configs: map[string]string{"retention.ms": "5"}}); err != nil {
		t.Fatal(err)
	}
	cid := e.ClusterID()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := Open(context.Background(), Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.ClusterID() != cid {
		t.Fatalf("cluster id %q, want %q", c.ClusterID(), cid)
	}
	ti, ok := c.Snapshot().Topic("old")
	if !ok || ti.ID != id || ti.Configs["retention.ms"] != "5" {
		t.Fatalf("topic %+v", ti)
	}
	if p := ti.Partitions[0]; p.State.Leader != 1 || p.State.LeaderEpoch != 4 || p.Version != 0 {
		t.Fatalf("partition %+v", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Register(ctx, BrokerInfo{ID: 1, Host: "127.0.0.1", Port: 9092}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, MetadataFile))
	if !strings.Contains(string(b), `"version": 2`) {
		t.Fatalf("file not rewritten in format 2:\n%s", b)
	}
	// The old reader refuses the new format rather than misread it.
	if _, _, err := OpenEmbedded(dir, Broker{}); err == nil {
		t.Fatal("Embedded opened a format 2 file")
	}
}
