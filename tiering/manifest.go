package tiering

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/stratastream/strata/segment"
)

// ManifestVersion is the manifest format this package writes. A change to
// the JSON layout (even an added field) takes a new version: DecodeManifest
// refuses fields it does not know, so an older broker never drops them by
// rewriting a newer manifest.
//
// Version 2 added legacy_keys and dropped; a version 1 manifest (always in
// the legacy key layout) still decodes, as a version 2 one with LegacyKeys
// set, and is written back as version 2.
const ManifestVersion = 2

// manifestVersionLegacy is the first format, read but no longer written.
const manifestVersionLegacy = 1

// Errors of the manifest logic.
var (
	// ErrFenced: the stored manifest was written by a newer leader epoch;
	// this writer is deposed and must stop uploading.
	ErrFenced = errors.New("tiering: fenced by a newer leader epoch")
	// ErrBadManifest: a manifest does not decode or breaks an invariant.
	ErrBadManifest = errors.New("tiering: invalid manifest")
	// ErrTopicMismatch: the stored manifest belongs to another incarnation
	// of the topic (a different topic id).
	ErrTopicMismatch = errors.New("tiering: manifest belongs to another topic id")
)

// Suffixes of a remote segment's objects (see RemoteSegment).
const (
	SuffixLog       = ".log"
	SuffixIndex     = ".index"
	SuffixTimeIndex = ".timeindex"
	SuffixSnapshot  = ".snapshot"
	// SuffixTxnIndex is the segment's aborted-transaction index
	// (segment.TxnIndex's file format), present when HasTxnIndex.
	SuffixTxnIndex = ".txnindex"
)

// manifestName is the last component of a manifest's key.
const manifestName = "manifest"

// NewManifest returns the empty manifest of a partition, as a partition
// with nothing remote has, in the layout keyed by topic id.
func NewManifest(topic, topicID string, partition int32) *Manifest {
	return &Manifest{Version: ManifestVersion, Topic: topic, TopicID: topicID, Partition: partition}
}

// Clone returns a deep copy of m.
func (m *Manifest) Clone() *Manifest {
	c := *m
	c.Segments = slices.Clone(m.Segments)
	for i := range c.Segments {
		c.Segments[i].LeaderEpochs = slices.Clone(c.Segments[i].LeaderEpochs)
	}
	c.Dropped = slices.Clone(m.Dropped)
	for i := range c.Dropped {
		c.Dropped[i].LeaderEpochs = slices.Clone(c.Dropped[i].LeaderEpochs)
	}
	c.Configs = maps.Clone(m.Configs)
	return &c
}

// Bytes returns the size of the remote .log objects.
func (m *Manifest) Bytes() int64 {
	var n int64
	for _, s := range m.Segments {
		n += s.Size
	}
	return n
}

// LeaderEpochEntries merges the segments' leader-epoch entries into one
// epoch history of the remote log, oldest first, each epoch with the first
// remote offset it wrote (clamped to LogStartOffset). A restore seeds the
// new log's epoch cache with it.
func (m *Manifest) LeaderEpochEntries() []segment.EpochEntry {
	var out []segment.EpochEntry
	for _, s := range m.Segments {
		for _, e := range s.LeaderEpochs {
			if n := len(out); n > 0 && out[n-1].Epoch >= e.Epoch {
				continue // the same epoch continuing into this segment
			}
			out = append(out, e)
		}
	}
	// Drop epochs that ended before the log start; clamp the one holding it.
	for len(out) > 1 && out[1].StartOffset <= m.LogStartOffset {
		out = out[1:]
	}
	if len(out) > 0 && out[0].StartOffset < m.LogStartOffset {
		out[0].StartOffset = m.LogStartOffset
	}
	return out
}

// Validate checks the manifest's invariants: the version, the partition
// identity (a valid topic id unless LegacyKeys), segments sorted,
// non-empty, contiguous and not overlapping, each with a sane size, epoch,
// id and leader-epoch entries inside it, the log start inside the first
// segment (or at the end of an empty manifest), and dropped segments that
// share no object with a live one or with each other. The error wraps
// ErrBadManifest.
func (m *Manifest) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s/%d: %s", ErrBadManifest, m.Topic, m.Partition, fmt.Sprintf(format, args...))
	}
	switch {
	case m.Version != ManifestVersion:
		return bad("version %d, want %d", m.Version, ManifestVersion)
	case !validTopicName(m.Topic):
		return bad("topic %q", m.Topic)
	case m.Partition < 0:
		return bad("partition %d", m.Partition)
	case !ValidTopicID(m.TopicID) && (!m.LegacyKeys || m.TopicID != ""):
		return bad("topic id %q", m.TopicID)
	case m.LeaderEpoch < 0:
		return bad("leader epoch %d", m.LeaderEpoch)
	case m.LogStartOffset < 0:
		return bad("log start offset %d", m.LogStartOffset)
	case m.NumPartitions < 0:
		return bad("num partitions %d", m.NumPartitions)
	}
	names := make(map[string]bool, len(m.Segments)+len(m.Dropped))
	for i := range m.Segments {
		s := &m.Segments[i]
		if i > 0 && s.BaseOffset != m.Segments[i-1].NextOffset {
			return bad("segment %d at %d does not follow the previous one, which ends at %d", i, s.BaseOffset, m.Segments[i-1].NextOffset)
		}
		if err := m.validateSegment(s); err != nil {
			return bad("segment %d at %d: %v", i, s.BaseOffset, err)
		}
		names[s.ObjectName()] = true
	}
	if len(m.Segments) > 0 {
		first := m.Segments[0]
		if m.LogStartOffset < first.BaseOffset || m.LogStartOffset >= first.NextOffset {
			return bad("log start offset %d outside the first segment [%d, %d)", m.LogStartOffset, first.BaseOffset, first.NextOffset)
		}
	}
	for i := range m.Dropped {
		d := &m.Dropped[i].RemoteSegment
		if err := m.validateSegment(d); err != nil {
			return bad("dropped segment %d at %d: %v", i, d.BaseOffset, err)
		}
		if names[d.ObjectName()] {
			return bad("dropped segment %d: objects %s are also those of another segment", i, d.ObjectName())
		}
		names[d.ObjectName()] = true
	}
	return nil
}

// validateSegment checks one segment entry on its own.
func (m *Manifest) validateSegment(s *RemoteSegment) error {
	switch {
	case s.BaseOffset < 0 || s.NextOffset <= s.BaseOffset:
		return fmt.Errorf("offsets [%d, %d)", s.BaseOffset, s.NextOffset)
	case s.Size <= 0:
		return fmt.Errorf("size %d", s.Size)
	case s.Epoch < 0 || s.Epoch > m.LeaderEpoch:
		return fmt.Errorf("uploader epoch %d, manifest epoch %d", s.Epoch, m.LeaderEpoch)
	case !validObjectID(s.ID):
		return fmt.Errorf("id %q", s.ID)
	case s.MaxTimestamp < -1:
		return fmt.Errorf("max timestamp %d", s.MaxTimestamp)
	}
	for j, e := range s.LeaderEpochs {
		if e.Epoch < 0 || e.StartOffset < s.BaseOffset || e.StartOffset >= s.NextOffset ||
			(j > 0 && (e.Epoch <= s.LeaderEpochs[j-1].Epoch || e.StartOffset <= s.LeaderEpochs[j-1].StartOffset)) {
			return fmt.Errorf("leader epoch entry %d %+v", j, e)
		}
	}
	return nil
}

// validObjectID reports whether id may appear in an object name: 1 to 64
// ASCII letters and digits.
func validObjectID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// EncodeManifest validates m and returns its JSON encoding.
func EncodeManifest(m *Manifest) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadManifest, err)
	}
	return append(b, '\n'), nil
}

// DecodeManifest parses and validates a manifest of either version. An
// unknown version or field, trailing data, or a broken invariant fail with
// ErrBadManifest.
func DecodeManifest(b []byte) (*Manifest, error) {
	var probe struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadManifest, err)
	}
	if probe.Version != ManifestVersion && probe.Version != manifestVersionLegacy {
		return nil, fmt.Errorf("%w: unsupported version %d", ErrBadManifest, probe.Version)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	m := new(Manifest)
	if err := dec.Decode(m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadManifest, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the manifest", ErrBadManifest)
	}
	if m.Version == manifestVersionLegacy {
		if m.LegacyKeys || m.Dropped != nil {
			return nil, fmt.Errorf("%w: version 1 with fields of version 2", ErrBadManifest)
		}
		m.Version, m.LegacyKeys = ManifestVersion, true
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if len(m.Configs) == 0 {
		// Canonical form: an empty map is written as no field at all
		// (omitempty), so it decodes as nil.
		m.Configs = nil
	}
	if len(m.Dropped) == 0 {
		m.Dropped = nil // likewise
	}
	return m, nil
}

// LoadManifest reads and validates the manifest of a partition of the
// topic incarnation topicID and returns it with its ETag, the version token
// CommitManifest wants. It looks under the topic id first, then in the
// legacy layout, where it takes a manifest only if it records topicID (one
// of a predecessor with the same name is not this partition's). It fails
// with ErrNotFound when the partition has no manifest, ErrBadManifest when
// the stored one is invalid (or names another partition), ErrUnavailable
// when the store cannot be reached.
func LoadManifest(ctx context.Context, store ObjectStore, topic, topicID string, partition int32) (*Manifest, string, error) {
	if !validTopicName(topic) || !ValidTopicID(topicID) || partition < 0 {
		return nil, "", fmt.Errorf("tiering: load manifest: invalid partition %q (id %q) %d", topic, topicID, partition)
	}
	m, etag, err := loadManifestAt(ctx, store, objectKey{topic: topic, topicID: topicID, partition: partition, name: manifestName})
	if !IsNotFound(err) {
		return m, etag, err
	}
	m, etag, err = loadManifestAt(ctx, store, objectKey{topic: topic, partition: partition, name: manifestName})
	if err != nil {
		return nil, "", err
	}
	if m.TopicID != topicID {
		return nil, "", fmt.Errorf("%w: %s belongs to topic id %q, not %s", ErrNotFound, LegacyManifestKey(topic, partition), m.TopicID, topicID)
	}
	return m, etag, nil
}

// loadManifestAt reads the manifest stored at k and checks that it is the
// one of k's partition, in k's layout.
func loadManifestAt(ctx context.Context, store ObjectStore, k objectKey) (*Manifest, string, error) {
	key := k.manifestKey()
	b, etag, err := readConsistent(ctx, store, key)
	if err != nil {
		return nil, "", err
	}
	m, err := DecodeManifest(b)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", key, err)
	}
	if m.Topic != k.topic || m.Partition != k.partition || m.LegacyKeys != k.legacy() || (!k.legacy() && m.TopicID != k.topicID) {
		return nil, "", fmt.Errorf("%w: %s holds the manifest of %s/%d (topic id %q, legacy layout %v)",
			ErrBadManifest, key, m.Topic, m.Partition, m.TopicID, m.LegacyKeys)
	}
	return m, etag, nil
}

// CommitManifest replaces the manifest stored at m.Key() with m and
// returns the new ETag. prevETag is the ETag of the manifest m was derived
// from ("" when the writer saw none). It reads the stored manifest first
// and fails with
//
//   - ErrFenced when the stored LeaderEpoch is higher than m's;
//   - ErrTopicMismatch when the stored one has another topic id;
//   - ErrPreconditionFailed when the stored manifest is not the one m was
//     derived from (its ETag differs from prevETag, or it appeared or
//     vanished), so the writer must reload and redo its change;
//
// then puts conditionally (If-Match the stored ETag, or If-None-Match when
// there is none), so a writer that raced in between makes the put fail the
// same way. When CommitManifest returns nil, m is durable in the store. An
// ErrUnavailable leaves the outcome unknown: reload to find out.
func CommitManifest(ctx context.Context, store ObjectStore, m *Manifest, prevETag string) (string, error) {
	data, err := EncodeManifest(m)
	if err != nil {
		return "", err
	}
	cur, curETag, err := loadManifestAt(ctx, store, m.objectKey())
	if err != nil && !IsNotFound(err) {
		return "", err
	}
	var cond PutCondition
	if cur == nil {
		if prevETag != "" {
			return "", fmt.Errorf("%w: manifest of %s/%d was deleted", ErrPreconditionFailed, m.Topic, m.Partition)
		}
		cond.IfNoneMatch = true
	} else {
		if err := checkSupersedes(m, cur); err != nil {
			return "", err
		}
		if curETag != prevETag {
			return "", fmt.Errorf("%w: manifest of %s/%d changed since it was read", ErrPreconditionFailed, m.Topic, m.Partition)
		}
		cond.IfMatch = curETag
	}
	info, err := store.Put(ctx, m.Key(), bytes.NewReader(data), int64(len(data)), cond)
	if errors.Is(err, ErrPreconditionFailed) {
		// Someone wrote in between; say whether it was a newer leader.
		if cur, _, lerr := loadManifestAt(ctx, store, m.objectKey()); lerr == nil {
			if ferr := checkSupersedes(m, cur); ferr != nil {
				return "", ferr
			}
		}
		return "", err
	}
	if err != nil {
		return "", err
	}
	return info.ETag, nil
}

// checkSupersedes says whether m may replace the stored manifest cur.
func checkSupersedes(m, cur *Manifest) error {
	if cur.LeaderEpoch > m.LeaderEpoch {
		return fmt.Errorf("%w: manifest of %s/%d has leader epoch %d, writer %d", ErrFenced, m.Topic, m.Partition, cur.LeaderEpoch, m.LeaderEpoch)
	}
	if cur.TopicID != "" && m.TopicID != "" && cur.TopicID != m.TopicID {
		return fmt.Errorf("%w: %s/%d stored %s, writer %s", ErrTopicMismatch, m.Topic, m.Partition, cur.TopicID, m.TopicID)
	}
	return nil
}

// infoGetter is implemented by stores that return an object's ETag with
// its content in one request.
type infoGetter interface {
	getWithInfo(ctx context.Context, key string) ([]byte, ObjectInfo, error)
}

// readConsistent reads a whole (small) object and the ETag of exactly the
// version read. Without an infoGetter it stats before and after the read
// and retries when the two differ: ETags of different contents never
// repeat, so equal ones bracket the version read.
func readConsistent(ctx context.Context, store ObjectStore, key string) ([]byte, string, error) {
	if g, ok := store.(infoGetter); ok {
		b, info, err := g.getWithInfo(ctx, key)
		return b, info.ETag, err
	}
	for range 5 {
		before, err := store.Stat(ctx, key)
		if err != nil {
			return nil, "", err
		}
		rc, err := store.Get(ctx, key, 0, -1)
		if err != nil {
			return nil, "", err
		}
		b, err := io.ReadAll(rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, "", fmt.Errorf("tiering: read %s: %w", key, err)
		}
		after, err := store.Stat(ctx, key)
		if err != nil {
			return nil, "", err
		}
		if before.ETag == after.ETag && int64(len(b)) == after.Size {
			return b, after.ETag, nil
		}
	}
	return nil, "", fmt.Errorf("%w: %s keeps changing while read", ErrPreconditionFailed, key)
}
