package tiering

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// RemoteTopic is what the bucket holds of one topic: enough to recreate it
// in a new cluster (`strata tier restore`).
type RemoteTopic struct {
	Name          string
	TopicID       string
	NumPartitions int32             // from the newest manifest; at least the highest partition + 1
	Configs       map[string]string // the topic's config overrides, from the newest manifest
	// Partitions holds the manifest of each partition that has one,
	// ordered by partition. A partition without a manifest had nothing
	// remote; it is recreated empty.
	Partitions []RemotePartition
}

// RemotePartition is one partition's manifest, as LoadManifest returned it.
type RemotePartition struct {
	Partition int32
	Manifest  *Manifest
	ETag      string
}

// ListRemoteTopics returns the names of the topics with at least one
// partition manifest in the store, sorted. It lists the whole store.
func ListRemoteTopics(ctx context.Context, store ObjectStore) ([]string, error) {
	objs, err := store.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("tiering: list remote topics: %w", err)
	}
	var names []string
	for _, o := range objs {
		topic, _, name, ok := splitObjectKey(o.Key)
		if ok && name == manifestName && (len(names) == 0 || names[len(names)-1] != topic) {
			names = append(names, topic)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// LoadRemoteTopic reads every partition manifest of topic. progress, if
// not nil, is called after each manifest with the count read and the
// total. It fails with ErrNotFound when the topic has no manifest, and
// with ErrBadManifest when its manifests disagree on the topic id.
func LoadRemoteTopic(ctx context.Context, store ObjectStore, topic string, progress func(done, total int)) (*RemoteTopic, error) {
	if topic == "" || strings.Contains(topic, "/") {
		return nil, fmt.Errorf("tiering: invalid topic name %q", topic)
	}
	objs, err := store.List(ctx, topic+"/")
	if err != nil {
		return nil, fmt.Errorf("tiering: list remote topic %s: %w", topic, err)
	}
	var parts []int32
	for _, o := range objs {
		if t, p, name, ok := splitObjectKey(o.Key); ok && t == topic && name == manifestName {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: no manifest of topic %s in the store", ErrNotFound, topic)
	}
	slices.Sort(parts)
	rt := &RemoteTopic{Name: topic}
	var newest *Manifest
	for i, p := range parts {
		m, etag, err := LoadManifest(ctx, store, topic, p)
		if IsNotFound(err) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		if rt.TopicID == "" {
			rt.TopicID = m.TopicID
		} else if m.TopicID != "" && m.TopicID != rt.TopicID {
			return nil, fmt.Errorf("%w: topic %s: partition %d has topic id %s, others %s", ErrBadManifest, topic, p, m.TopicID, rt.TopicID)
		}
		if newest == nil || m.UpdatedAt.After(newest.UpdatedAt) {
			newest = m
		}
		rt.Partitions = append(rt.Partitions, RemotePartition{Partition: p, Manifest: m, ETag: etag})
		if progress != nil {
			progress(i+1, len(parts))
		}
	}
	if newest == nil {
		return nil, fmt.Errorf("%w: no manifest of topic %s in the store", ErrNotFound, topic)
	}
	rt.Configs = newest.Configs
	rt.NumPartitions = max(newest.NumPartitions, rt.Partitions[len(rt.Partitions)-1].Partition+1)
	return rt, nil
}

// FetchProducerSnapshot returns the producer-state snapshot stored with
// the last remote segment of m, and the offset it holds the state at (the
// remote end). ok is false when that segment has none. A restored
// partition writes it into its directory (producer.WriteSnapshot) so that
// idempotent producers continue after the last remote offset.
func FetchProducerSnapshot(ctx context.Context, store ObjectStore, m *Manifest) (offset int64, data []byte, ok bool, err error) {
	if len(m.Segments) == 0 {
		return 0, nil, false, nil
	}
	last := &m.Segments[len(m.Segments)-1]
	if !last.HasSnapshot {
		return 0, nil, false, nil
	}
	key := SegmentKey(m.Topic, m.Partition, last, SuffixSnapshot)
	rc, err := store.Get(ctx, key, 0, -1)
	if err != nil {
		return 0, nil, false, fmt.Errorf("tiering: producer snapshot %s: %w", key, err)
	}
	data, err = io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("tiering: producer snapshot %s: %w", key, err)
	}
	return last.NextOffset, data, true, nil
}
