package broker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startOn starts a server on the data directory dir with extra settings,
// and a client for it; both are closed by the caller or at the end.
func startOn(t *testing.T, dir string, props map[string]string) (*Server, *kgo.Client) {
	t.Helper()
	all := map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "metrics.listener": "", "log.dirs": dir, "offsets.topic.num.partitions": "2"}
	for k, v := range props {
		all[k] = v
	}
	cfg, err := ConfigFromProperties(all)
	if err != nil {
		t.Fatal(err)
	}
	s := startServerConfig(t, cfg)
	return s, newClient(t, s)
}

// TestDataDirFromBeforeClustering: a data directory written by the
// single-node broker before clustering (metadata file format 1, no
// partition.metadata, no meta.properties) is taken over with its data.
func TestDataDirFromBeforeClustering(t *testing.T) {
	dir := t.TempDir()
	s1, cl := startOn(t, dir, nil)
	createTopic(t, cl, "old", 2, map[string]string{"retention.ms": "123456"})
	produceRaw(t, cl, "old", 1, buildBatch(t, segment.CodecNone, 5))
	id, cid := s1.topic("old").id, s1.ClusterID()
	if err := s1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Rewrite the directory as the single-node broker left it.
	var v2 struct {
		ClusterID string `json:"cluster_id"`
		Topics    map[string]struct {
			ID         coord.TopicID     `json:"id"`
			Configs    map[string]string `json:"configs"`
			Partitions []struct {
				Replicas    []int32 `json:"replicas"`
				LeaderEpoch int32   `json:"leader_epoch"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	b, err := os.ReadFile(filepath.Join(dir, coord.MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v2); err != nil {
		t.Fatal(err)
	}
	type v1Partition struct {
		Replicas    []int32 `json:"replicas"`
		ISR         []int32 `json:"isr"`
		Leader      int32   `json:"leader"`
		LeaderEpoch int32   `json:"leader_epoch"`
	}
	type v1Topic struct {
		ID         coord.TopicID     `json:"id"`
		Partitions []v1Partition     `json:"partitions"`
		Configs    map[string]string `json:"configs,omitempty"`
	}
	v1 := struct {
		Version   int                `json:"version"`
		ClusterID string             `json:"cluster_id"`
		Topics    map[string]v1Topic `json:"topics"`
	}{Version: 1, ClusterID: v2.ClusterID, Topics: map[string]v1Topic{}}
	for name, t2 := range v2.Topics {
		t1 := v1Topic{ID: t2.ID, Configs: t2.Configs}
		for _, p := range t2.Partitions {
			t1.Partitions = append(t1.Partitions, v1Partition{Replicas: []int32{0}, ISR: []int32{0}, Leader: 0, LeaderEpoch: p.LeaderEpoch})
		}
		v1.Topics[name] = t1
	}
	b, err = json.Marshal(v1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, coord.MetadataFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*", partitionMetadataFile))
	if len(old) == 0 {
		t.Fatal("no partition.metadata written")
	}
	for _, f := range append(old, filepath.Join(dir, metaPropertiesFile)) {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}

	s2, _ := startOn(t, dir, nil)
	if s2.ClusterID() != cid {
		t.Fatalf("cluster id: got %s, want %s", s2.ClusterID(), cid)
	}
	tp := s2.topic("old")
	if tp == nil || tp.id != id || len(tp.parts) != 2 || tp.overrides["retention.ms"] != "123456" {
		t.Fatalf("topic after migration: %+v", tp)
	}
	if hw := tp.local(1).log.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark after migration: got %d, want 5", hw)
	}
	if got, ok, err := readPartitionTopicID(tp.local(1).path()); err != nil || !ok || got != id {
		t.Fatalf("partition.metadata after migration: %v %v %v, want %v", got, ok, err, id)
	}
	if _, err := os.Stat(filepath.Join(dir, metaPropertiesFile)); err != nil {
		t.Fatalf("meta.properties not written: %v", err)
	}
	b, _ = os.ReadFile(filepath.Join(dir, coord.MetadataFile))
	if !strings.Contains(string(b), `"version": 2`) {
		t.Fatalf("metadata file not rewritten in format 2:\n%s", b)
	}
}

// TestStrayPartitionsRemovedByTopicID: at start, partition directories of
// topics that are gone are removed by topic ID; a topic created again
// under the same name does not inherit the old logs.
func TestStrayPartitionsRemovedByTopicID(t *testing.T) {
	dir := t.TempDir()
	s1, cl := startOn(t, dir, nil)
	createTopic(t, cl, "keep", 1, nil)
	createTopic(t, cl, "renewed", 1, nil)
	produceRaw(t, cl, "keep", 0, buildBatch(t, segment.CodecNone, 3))
	produceRaw(t, cl, "renewed", 0, buildBatch(t, segment.CodecNone, 3))
	if err := s1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// renewed-0 holds the log of an older topic of that name; gone-0 that
	// of a deleted topic; legacy-0 has no partition.metadata and no topic.
	if err := writePartitionTopicID(filepath.Join(dir, "renewed-0"), coord.NewTopicID()); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"gone-0", "legacy-0"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := writePartitionTopicID(filepath.Join(dir, "gone-0"), coord.NewTopicID()); err != nil {
		t.Fatal(err)
	}

	s2, _ := startOn(t, dir, nil)
	for _, d := range []string{"gone-0", "legacy-0"} {
		if _, err := os.Stat(filepath.Join(dir, d)); !os.IsNotExist(err) {
			t.Errorf("%s kept: %v", d, err)
		}
	}
	if hw := s2.topic("keep").local(0).log.HighWatermark(); hw != 3 {
		t.Errorf("keep-0: high watermark %d, want 3", hw)
	}
	if hw := s2.topic("renewed").local(0).log.HighWatermark(); hw != 0 {
		t.Errorf("renewed-0: high watermark %d, want 0 (the old topic's log removed)", hw)
	}
}

// TestDataDirOfAnotherBrokerRefused: meta.properties ties the data
// directory to its broker id.
func TestDataDirOfAnotherBrokerRefused(t *testing.T) {
	dir := t.TempDir()
	s1, _ := startOn(t, dir, nil)
	if err := s1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg, err := ConfigFromProperties(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "metrics.listener": "", "log.dirs": dir, "broker.id": "7"})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := NewServer(cfg); err == nil || !strings.Contains(err.Error(), "belongs to broker.id 0") {
		if s != nil {
			_ = s.Shutdown(context.Background())
		}
		t.Fatalf("got %v, want a refusal naming broker.id 0", err)
	}
}
