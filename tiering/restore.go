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
	// OtherIDs are the topic ids of other incarnations of the name in the
	// store (a topic deleted and created again whose remote data was not
	// deleted), which LoadRemoteTopic did not pick.
	OtherIDs []string
}

// RemotePartition is one partition's manifest, as LoadManifest returned it.
type RemotePartition struct {
	Partition int32
	Manifest  *Manifest
	ETag      string
}

// ListRemoteTopics returns the names of the topics with at least one
// partition manifest in the store, in either key layout, sorted. It lists
// the whole store.
func ListRemoteTopics(ctx context.Context, store ObjectStore) ([]string, error) {
	objs, err := store.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("tiering: list remote topics: %w", err)
	}
	var names []string
	for _, o := range objs {
		if k, ok := parseObjectKey(o.Key); ok && k.name == manifestName {
			names = append(names, k.topic)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// LoadRemoteTopic reads every partition manifest of topic, in both key
// layouts. The manifests are grouped by the topic id they record (one
// incarnation of the name each); the incarnation written last (the newest
// UpdatedAt of its manifests) is returned, the others' ids in OtherIDs.
// Of a partition with a manifest in both layouts (only an older broker
// writing beside a newer one makes that), the one keyed by topic id is
// taken, as LoadManifest does. progress, if not nil, is called after each
// manifest with the count read and the total. It fails with ErrNotFound
// when the topic has no manifest.
func LoadRemoteTopic(ctx context.Context, store ObjectStore, topic string, progress func(done, total int)) (*RemoteTopic, error) {
	if !validTopicName(topic) {
		return nil, fmt.Errorf("tiering: invalid topic name %q", topic)
	}
	objs, err := store.List(ctx, topic+"/")
	if err != nil {
		return nil, fmt.Errorf("tiering: list remote topic %s: %w", topic, err)
	}
	var keys []objectKey
	for _, o := range objs {
		if k, ok := parseObjectKey(o.Key); ok && k.topic == topic && k.name == manifestName {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no manifest of topic %s in the store", ErrNotFound, topic)
	}
	type incarnation struct {
		parts  map[int32]RemotePartition
		newest *Manifest
	}
	incs := map[string]*incarnation{}
	for i, k := range keys {
		m, etag, err := loadManifestAt(ctx, store, k)
		if IsNotFound(err) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		inc := incs[m.TopicID]
		if inc == nil {
			inc = &incarnation{parts: map[int32]RemotePartition{}}
			incs[m.TopicID] = inc
		}
		if have, ok := inc.parts[k.partition]; !ok || (have.Manifest.LegacyKeys && !m.LegacyKeys) {
			inc.parts[k.partition] = RemotePartition{Partition: k.partition, Manifest: m, ETag: etag}
		}
		if inc.newest == nil || m.UpdatedAt.After(inc.newest.UpdatedAt) {
			inc.newest = m
		}
		if progress != nil {
			progress(i+1, len(keys))
		}
	}
	var ids []string
	for id := range incs {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no manifest of topic %s in the store", ErrNotFound, topic)
	}
	// The newest incarnation; one without a topic id (not restorable) only
	// when there is no other; ties by id, so the choice is stable.
	slices.SortFunc(ids, func(a, b string) int {
		if (a == "") != (b == "") {
			if a == "" {
				return 1
			}
			return -1
		}
		if c := incs[b].newest.UpdatedAt.Compare(incs[a].newest.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	inc := incs[ids[0]]
	rt := &RemoteTopic{Name: topic, TopicID: ids[0], Configs: inc.newest.Configs, OtherIDs: ids[1:]}
	for _, rp := range inc.parts {
		rt.Partitions = append(rt.Partitions, rp)
	}
	slices.SortFunc(rt.Partitions, func(a, b RemotePartition) int { return int(a.Partition - b.Partition) })
	rt.NumPartitions = max(inc.newest.NumPartitions, rt.Partitions[len(rt.Partitions)-1].Partition+1)
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
	end := m.EndOffset()
	data, ok, err = FetchProducerSnapshotAt(ctx, store, m, end)
	return end, data, ok, err
}

// FetchProducerSnapshotAt returns the producer-state snapshot stored with
// the remote segment of m that ends at offset (its NextOffset). ok is false
// when no segment ends there or that segment has none.
func FetchProducerSnapshotAt(ctx context.Context, store ObjectStore, m *Manifest, offset int64) (data []byte, ok bool, err error) {
	i := slices.IndexFunc(m.Segments, func(s RemoteSegment) bool { return s.NextOffset == offset })
	if i < 0 || !m.Segments[i].HasSnapshot {
		return nil, false, nil
	}
	key := m.SegmentKey(&m.Segments[i], SuffixSnapshot)
	rc, err := store.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, false, fmt.Errorf("tiering: producer snapshot %s: %w", key, err)
	}
	data, err = io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, fmt.Errorf("tiering: producer snapshot %s: %w", key, err)
	}
	return data, true, nil
}
