package coord

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

// Errors of topic operations, and of every call after Close.
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
