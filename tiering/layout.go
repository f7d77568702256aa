package tiering

import (
	"strconv"
	"strings"
)

// Object keys.
//
// Every object of a partition lives under its partition prefix, which
// names the topic incarnation by its topic id:
//
//	<topic>/<topic id>/<partition>/manifest
//	<topic>/<topic id>/<partition>/<base>-<epoch>-<id>.<suffix>
//
// so that a topic deleted and created again under the same name (a new
// topic id) never reads, overwrites or deletes its predecessor's objects,
// nor its predecessor's deletion the new topic's.
//
// Buckets written before the topic id joined the keys hold the legacy
// layout, one directory per topic name:
//
//	<topic>/<partition>/manifest
//	<topic>/<partition>/<base>-<epoch>-<id>.<suffix>
//
// Such a partition keeps its layout for the rest of its life (dual read,
// no migration): its manifest says so (Manifest.LegacyKeys), its archiver
// goes on committing there and its new segments go next to the old ones.
// A partition is adopted into the legacy layout only by the topic whose id
// its manifest records (LoadManifest), so a new incarnation never touches
// a legacy directory, and a legacy directory is deleted only with the
// topic whose id its manifest records (DeletePartition). Moving a legacy
// partition would copy every object (months of data: GET and PUT, no copy
// in ObjectStore) and could not be atomic (the manifest is the one commit
// point; two manifests of one partition in two places are what the layout
// is meant to prevent).
//
// The two layouts never share a key: a topic id is 36 characters with
// dashes (8-4-4-4-12 lowercase hex digits, coord.TopicID's form) and a
// partition number only digits, so no prefix of one layout is a prefix of
// the other, and their keys have four and three components.

// ValidTopicID reports whether id is a topic id as keys carry it: 8-4-4-4-12
// lowercase hex digits.
func ValidTopicID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// validTopicName reports whether topic may be a key's first component.
func validTopicName(topic string) bool {
	return topic != "" && !strings.ContainsAny(topic, "/\x00")
}

// PartitionPrefix is the key prefix of everything of one partition of the
// topic incarnation topicID: "<topic>/<topic id>/<partition>/".
func PartitionPrefix(topic, topicID string, partition int32) string {
	return topic + "/" + topicID + "/" + strconv.Itoa(int(partition)) + "/"
}

// ManifestKey is the key of the manifest of partition of the topic
// incarnation topicID.
func ManifestKey(topic, topicID string, partition int32) string {
	return PartitionPrefix(topic, topicID, partition) + manifestName
}

// LegacyPartitionPrefix is the key prefix of a partition in the legacy
// layout: "<topic>/<partition>/".
func LegacyPartitionPrefix(topic string, partition int32) string {
	return topic + "/" + strconv.Itoa(int(partition)) + "/"
}

// LegacyManifestKey is the key of a partition's manifest in the legacy
// layout.
func LegacyManifestKey(topic string, partition int32) string {
	return LegacyPartitionPrefix(topic, partition) + manifestName
}

// objectKey is a parsed key of either layout; topicID is "" for the
// legacy layout.
type objectKey struct {
	topic     string
	topicID   string
	partition int32
	name      string // the last component: "manifest" or a segment object
}

// legacy reports whether the key is of the legacy layout.
func (k objectKey) legacy() bool { return k.topicID == "" }

// prefix is the partition prefix the key lies under.
func (k objectKey) prefix() string {
	if k.legacy() {
		return LegacyPartitionPrefix(k.topic, k.partition)
	}
	return PartitionPrefix(k.topic, k.topicID, k.partition)
}

// manifestKey is the key of the manifest of the key's partition.
func (k objectKey) manifestKey() string { return k.prefix() + manifestName }

// parseObjectKey splits "<topic>/<topic id>/<partition>/<name>" or the
// legacy "<topic>/<partition>/<name>". Keys of neither form are not
// Strata's; ok is false for them.
func parseObjectKey(key string) (k objectKey, ok bool) {
	parts := strings.Split(key, "/")
	switch {
	case len(parts) == 3:
		k.topic, k.name = parts[0], parts[2]
		k.partition, ok = parsePartition(parts[1])
	case len(parts) == 4 && ValidTopicID(parts[1]):
		k.topic, k.topicID, k.name = parts[0], parts[1], parts[3]
		k.partition, ok = parsePartition(parts[2])
	}
	if !ok || !validTopicName(k.topic) || k.name == "" {
		return objectKey{}, false
	}
	return k, true
}

// parsePartition parses a partition number in its canonical form.
func parsePartition(s string) (int32, bool) {
	p, err := strconv.ParseInt(s, 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != s {
		return 0, false
	}
	return int32(p), true
}

// isSegmentObjectName reports whether name is a segment object's name:
// <20 digits>-<epoch>-<id><suffix>.
func isSegmentObjectName(name string) bool {
	var suffix string
	for _, s := range []string{SuffixLog, SuffixIndex, SuffixTimeIndex, SuffixSnapshot, SuffixTxnIndex} {
		if strings.HasSuffix(name, s) {
			suffix = s
			break
		}
	}
	if suffix == "" {
		return false
	}
	f := strings.Split(strings.TrimSuffix(name, suffix), "-")
	if len(f) != 3 || len(f[0]) != 20 || !validObjectID(f[2]) {
		return false
	}
	if _, err := strconv.ParseUint(f[0], 10, 63); err != nil {
		return false
	}
	_, err := strconv.ParseUint(f[1], 10, 31)
	return err == nil
}

// Prefix is the key prefix of the manifest's partition, in its layout.
func (m *Manifest) Prefix() string {
	if m.LegacyKeys {
		return LegacyPartitionPrefix(m.Topic, m.Partition)
	}
	return PartitionPrefix(m.Topic, m.TopicID, m.Partition)
}

// Key is the key the manifest is stored under.
func (m *Manifest) Key() string { return m.Prefix() + manifestName }

// objectKey is the parsed form of Key.
func (m *Manifest) objectKey() objectKey {
	k := objectKey{topic: m.Topic, partition: m.Partition, name: manifestName}
	if !m.LegacyKeys {
		k.topicID = m.TopicID
	}
	return k
}

// SegmentKey is the key of one of s's objects (s a segment of m, live or
// dropped); suffix is one of the Suffix constants.
func (m *Manifest) SegmentKey(s *RemoteSegment, suffix string) string {
	return m.Prefix() + s.ObjectName() + suffix
}

// SegmentKeys lists the keys of all of s's objects.
func (m *Manifest) SegmentKeys(s *RemoteSegment) []string {
	return segmentKeys(m.Prefix(), s)
}

// segmentKeys lists the keys of s's objects under prefix.
func segmentKeys(prefix string, s *RemoteSegment) []string {
	name := prefix + s.ObjectName()
	keys := []string{name + SuffixLog, name + SuffixIndex, name + SuffixTimeIndex}
	if s.HasSnapshot {
		keys = append(keys, name+SuffixSnapshot)
	}
	if s.HasTxnIndex {
		keys = append(keys, name+SuffixTxnIndex)
	}
	return keys
}
