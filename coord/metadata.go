package coord

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Errors returned by Metadata implementations.
var (
	// ErrTopicExists is returned by CreateTopic for a name already in use.
	ErrTopicExists = errors.New("coord: topic already exists")
	// ErrUnknownTopic is returned for a topic name that does not exist.
	ErrUnknownTopic = errors.New("coord: unknown topic")
	// ErrInvalidPartitions is returned by AddPartitions when the new
	// partitions do not describe a growth of the topic.
	ErrInvalidPartitions = errors.New("coord: invalid partitions")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("coord: closed")
)

// Metadata is the cluster metadata a broker reads and changes. Every
// mutating method persists the change (durably, for Embedded: the file is
// fsynced and renamed into place, and the directory fsynced) before it
// returns nil; on error nothing was changed. Readers return copies that the
// caller may keep and modify.
type Metadata interface {
	// ClusterID is the cluster's ID, generated once when the metadata is
	// first created and never changed after.
	ClusterID() string

	// Brokers lists the live brokers, ordered by ID.
	Brokers() []Broker

	// Controller is the ID of the broker acting as controller.
	Controller() int32

	// Topics lists every topic, ordered by name.
	Topics() []Topic

	// Topic returns one topic and whether it exists.
	Topic(name string) (Topic, bool)

	// CreateTopic records a new topic. t.ID must be set (see NewTopicID)
	// and t.Partitions must be non-empty. It fails with ErrTopicExists if
	// the name is taken.
	CreateTopic(t Topic) error

	// DeleteTopic removes a topic. It fails with ErrUnknownTopic.
	DeleteTopic(name string) error

	// SetTopicConfig replaces the topic's config overrides with configs (an
	// empty or nil map removes them all). Validation is the caller's job.
	// It fails with ErrUnknownTopic.
	SetTopicConfig(name string, configs map[string]string) error

	// AddPartitions appends partitions to a topic. It fails with
	// ErrUnknownTopic, or ErrInvalidPartitions if parts is empty.
	AddPartitions(name string, parts []Partition) error

	// Close releases the implementation's resources. Later calls fail with
	// ErrClosed.
	Close() error
}

// Broker is one registered broker and the address clients reach it at.
type Broker struct {
	ID   int32
	Host string
	Port int32
	// Rack is the broker's rack, or nil.
	Rack *string
}

// Topic is a topic's metadata.
type Topic struct {
	Name string
	// ID is the topic's UUID (Kafka's topic ID, KIP-516).
	ID TopicID
	// Partitions is indexed by partition number.
	Partitions []Partition
	// Configs holds the topic's config overrides by Kafka name; settings
	// not here take the broker's defaults.
	Configs map[string]string
}

// Clone returns a deep copy of t.
func (t Topic) Clone() Topic {
	c := t
	c.Partitions = make([]Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		c.Partitions[i] = p.Clone()
	}
	c.Configs = maps.Clone(t.Configs)
	if c.Configs == nil {
		c.Configs = map[string]string{}
	}
	return c
}

// Partition is one partition's assignment and leader state.
type Partition struct {
	// Replicas are the broker IDs holding the partition, preferred leader
	// first.
	Replicas []int32 `json:"replicas"`
	// ISR is the in-sync replica set.
	ISR []int32 `json:"isr"`
	// Leader is the leader's broker ID, -1 if none.
	Leader int32 `json:"leader"`
	// LeaderEpoch goes up by one at every leader change.
	LeaderEpoch int32 `json:"leader_epoch"`
}

// Clone returns a deep copy of p.
func (p Partition) Clone() Partition {
	c := p
	c.Replicas = slices.Clone(p.Replicas)
	c.ISR = slices.Clone(p.ISR)
	return c
}

// TopicID is a topic's UUID.
type TopicID [16]byte

// NewTopicID returns a random (version 4) UUID. It is never the zero UUID,
// which Kafka reserves for "no ID".
func NewTopicID() TopicID {
	var id TopicID
	for id == (TopicID{}) {
		if _, err := rand.Read(id[:]); err != nil {
			panic("coord: crypto/rand failed: " + err.Error())
		}
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
	}
	return id
}

// String formats the ID as 8-4-4-4-12 hex digits.
func (id TopicID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// ParseTopicID parses the String form.
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, fmt.Errorf("coord: malformed topic id %q", s)
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return id, fmt.Errorf("coord: malformed topic id %q: %w", s, err)
	}
	return id, nil
}

// MarshalText implements encoding.TextMarshaler.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *TopicID) UnmarshalText(b []byte) error {
	v, err := ParseTopicID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// NewClusterID returns a cluster ID in Kafka's form: 16 random bytes in
// URL-safe base64 without padding (22 characters).
func NewClusterID() string {
	id := NewTopicID()
	return base64.RawURLEncoding.EncodeToString(id[:])
}
