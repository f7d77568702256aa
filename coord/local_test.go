package coord

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalReadsEmbeddedFile: the embedded coordinator takes over the data
// directory of the single-node broker before clustering (format 1).
func TestLocalReadsEmbeddedFile(t *testing.T) {
	dir := t.TempDir()
	id := NewTopicID()
	cid := NewClusterID()
	v1 := fmt.Sprintf(`{
  "version": 1,
  "cluster_id": %q,
  "topics": {
    "old": {
      "id": %q,
      "partitions": [{"replicas": [1], "isr": [1], "leader": 1, "leader_epoch": 4}],
      "configs": {"retention.ms": "5"}
    }
  }
}
`, cid, id.String())
	if err := os.WriteFile(filepath.Join(dir, MetadataFile), []byte(v1), 0o644); err != nil {
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
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := c.Register(ctx, BrokerInfo{ID: 1, Host: "127.0.0.1", Port: 9092}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, MetadataFile))
	if !strings.Contains(string(b), `"version": 2`) {
		t.Fatalf("file not rewritten in format 2:\n%s", b)
	}
}
