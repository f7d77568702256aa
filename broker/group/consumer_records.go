package group

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The records of consumer groups (KIP-848) in __consumer_offsets, as
// Kafka's group coordinator writes them (its ConsumerGroup*Key/Value
// schemas). A key is an int16 record type followed by int16-length
// strings; a value is an int16 version (0) followed by the fields in
// Kafka's flexible encoding: compact strings and arrays (an unsigned
// varint of length+1, 0 for null), 16-byte uuids, big-endian integers,
// and after every struct a tagged-field section (an unsigned varint count,
// then per field its tag, its size and its bytes), which this code writes
// empty and skips when reading. doc.go draws them. Stored data depends on
// these numbers: never change or reuse them.
const (
	keyConsumerMetadataV3          int16 = 3 // group epoch
	keyConsumerPartitionMetadataV4 int16 = 4 // subscribed topics' metadata
	keyConsumerMemberV5            int16 = 5 // a member's subscription and client
	keyConsumerTargetMetadataV6    int16 = 6 // the target assignment's epoch
	keyConsumerTargetMemberV7      int16 = 7 // a member's target assignment
	keyConsumerCurrentMemberV8     int16 = 8 // a member's epochs and current assignment

	consumerValueV0 int16 = 0
)

// errShortRecord is a consumer record value cut short.
var errShortRecord = errors.New("truncated")

// consumerRecord is one decoded consumer group record: the key's type,
// group and member, and the value (nil for a tombstone).
type consumerRecord struct {
	kind   int16
	member string

	epoch      int32                // kinds 3 and 6
	topics     map[string]TopicMeta // kind 4
	memberMeta *consumerMember      // kind 5: ids, client, subscription
	target     partitionSet         // kind 7
	current    *consumerMember      // kind 8: epochs, state, assigned, revoking
	tombstone  bool
}

// consumerKey encodes the key of a consumer record; member is left out
// of the group-level kinds (3, 4, 6).
func consumerKey(kind int16, group, member string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(kind))
	b = appendString(b, group)
	switch kind {
	case keyConsumerMemberV5, keyConsumerTargetMemberV7, keyConsumerCurrentMemberV8:
		b = appendString(b, member)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// flexWriter appends the flexible encoding of a value.
type flexWriter struct{ b []byte }

func newFlexValue() *flexWriter {
	return &flexWriter{b: binary.BigEndian.AppendUint16(nil, uint16(consumerValueV0))}
}

func (w *flexWriter) int8(v int8)   { w.b = append(w.b, byte(v)) }
func (w *flexWriter) int32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *flexWriter) uvarint(v int) { w.b = binary.AppendUvarint(w.b, uint64(v)) }
func (w *flexWriter) uuid(v [16]byte) {
	w.b = append(w.b, v[:]...)
}
func (w *flexWriter) str(s string) { w.uvarint(len(s) + 1); w.b = append(w.b, s...) }
func (w *flexWriter) nullableStr(s *string) {
	if s == nil {
		w.uvarint(0)
		return
	}
	w.str(*s)
}
func (w *flexWriter) arrayLen(n int) { w.uvarint(n + 1) }
func (w *flexWriter) bytes(b []byte) { w.uvarint(len(b) + 1); w.b = append(w.b, b...) }
func (w *flexWriter) noTags()        { w.uvarint(0) }

// flexReader reads the flexible encoding; the first error sticks and
// every later read returns zero values.
type flexReader struct {
	b   []byte
	err error
}

func (r *flexReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *flexReader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.fail(errShortRecord)
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *flexReader) int8() int8   { b := r.take(1); return int8(firstOr0(b)) }
func (r *flexReader) int16() int16 { b := r.take(2); return int16(be16(b)) }
func (r *flexReader) int32() int32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func firstOr0(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func be16(b []byte) uint16 {
	if len(b) < 2 {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

func (r *flexReader) uvarint() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > math.MaxInt32 {
		r.fail(errShortRecord)
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *flexReader) uuid() (id [16]byte) {
	copy(id[:], r.take(16))
	return id
}

// nullableStr reads a compact nullable string.
func (r *flexReader) nullableStr() *string {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return nil
	}
	s := string(r.take(n - 1))
	return &s
}

func (r *flexReader) str() string {
	s := r.nullableStr()
	if s == nil {
		r.fail(errors.New("null string"))
		return ""
	}
	return *s
}

// arrayLen reads a compact array length, -1 for null; a length that the
// remaining bytes cannot hold (each element takes at least minSize bytes)
// is an error, so a corrupt length cannot make the reader allocate.
func (r *flexReader) arrayLen(minSize int) int {
	n := r.uvarint() - 1
	if n > len(r.b)/max(minSize, 1) {
		r.fail(errShortRecord)
		return 0
	}
	return n
}

// skipTags skips a tagged-field section.
func (r *flexReader) skipTags() { r.readTags(nil) }

// readTags reads a tagged-field section, handing each field to fn (nil:
// skip them all).
func (r *flexReader) readTags(fn func(tag int, data []byte)) {
	for n := r.uvarint(); n > 0 && r.err == nil; n-- {
		tag := r.uvarint()
		data := r.take(r.uvarint())
		if fn != nil && r.err == nil {
			fn(tag, data)
		}
	}
}

// compactBytes reads compact bytes (null reads as nil), copied.
func (r *flexReader) compactBytes() []byte {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return nil
	}
	return bytes.Clone(r.take(n - 1))
}

// appendPartitions encodes a set as Kafka's []TopicPartitions.
func (w *flexWriter) partitions(s partitionSet) {
	var topics [][16]byte
	var parts [][]int32
	s.byTopic(func(id [16]byte, ps []int32) { topics, parts = append(topics, id), append(parts, ps) })
	w.arrayLen(len(topics))
	for i, id := range topics {
		w.uuid(id)
		w.arrayLen(len(parts[i]))
		for _, p := range parts[i] {
			w.int32(p)
		}
		w.noTags()
	}
}

func (r *flexReader) partitions() partitionSet {
	s := make(partitionSet)
	n := r.arrayLen(18)
	for range n {
		id := r.uuid()
		m := r.arrayLen(4)
		for range m {
			s[topicPartition{id, r.int32()}] = struct{}{}
		}
		r.skipTags()
	}
	return s
}

// consumerEpochValue encodes ConsumerGroupMetadataValue and
// ConsumerGroupTargetAssignmentMetadataValue: one epoch.
func consumerEpochValue(epoch int32) []byte {
	w := newFlexValue()
	w.int32(epoch)
	w.noTags()
	return w.b
}

// consumerTopicsValue encodes ConsumerGroupPartitionMetadataValue (no
// rack metadata, which Kafka 4 no longer reads).
func consumerTopicsValue(topics map[string]TopicMeta) []byte {
	w := newFlexValue()
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	slices.Sort(names)
	w.arrayLen(len(names))
	for _, n := range names {
		t := topics[n]
		w.uuid(t.ID)
		w.str(t.Name)
		w.int32(t.Partitions)
		w.arrayLen(0)
		w.noTags()
	}
	w.noTags()
	return w.b
}

// consumerMemberValue encodes ConsumerGroupMemberMetadataValue.
func consumerMemberValue(m *consumerMember) []byte {
	w := newFlexValue()
	w.nullableStr(m.instanceID)
	w.nullableStr(m.rackID)
	w.str(m.clientID)
	w.str(m.clientHost)
	w.arrayLen(len(m.topics))
	for _, t := range m.topics {
		w.str(t)
	}
	if m.regex != "" {
		w.str(m.regex)
	} else {
		w.nullableStr(nil)
	}
	w.int32(int32(m.rebalanceTimeout.Milliseconds()))
	if m.assignor != "" {
		w.str(m.assignor)
	} else {
		w.nullableStr(nil)
	}
	if m.classic == nil {
		w.noTags()
		return w.b
	}
	// Tag 0, ClassicMemberMetadata (a nullable struct: its size counts
	// the presence marker 1 before it): session timeout, and the
	// supported protocols with their metadata.
	cw := &flexWriter{}
	cw.int32(int32(m.classic.sessionTimeout.Milliseconds()))
	cw.arrayLen(len(m.classic.protocols))
	for _, p := range m.classic.protocols {
		cw.str(p.Name)
		cw.bytes(p.Metadata)
		cw.noTags()
	}
	cw.noTags()
	w.uvarint(1) // one tagged field
	w.uvarint(classicMemberMetadataTag)
	w.uvarint(len(cw.b) + 1)
	w.uvarint(1)
	w.b = append(w.b, cw.b...)
	return w.b
}

// classicMemberMetadataTag is the tag of ClassicMemberMetadata in
// ConsumerGroupMemberMetadataValue.
const classicMemberMetadataTag = 0

// readClassicMember decodes a ClassicMemberMetadata tagged field; nil
// for a null one.
func readClassicMember(data []byte) (*classicMember, error) {
	r := &flexReader{b: data}
	if r.uvarint() == 0 {
		return nil, r.err
	}
	cm := &classicMember{sessionTimeout: msDuration(r.int32())}
	for n := r.arrayLen(3); n > 0; n-- {
		name := r.str()
		meta := r.compactBytes()
		r.skipTags()
		cm.protocols = append(cm.protocols, kmsg.JoinGroupRequestProtocol{Name: name, Metadata: meta})
	}
	r.skipTags()
	if r.err == nil && len(cm.protocols) == 0 {
		r.fail(errors.New("classic member without protocols"))
	}
	return cm, r.err
}

// consumerTargetValue encodes ConsumerGroupTargetAssignmentMemberValue.
func consumerTargetValue(s partitionSet) []byte {
	w := newFlexValue()
	w.partitions(s)
	w.noTags()
	return w.b
}

// consumerCurrentValue encodes ConsumerGroupCurrentMemberAssignmentValue.
func consumerCurrentValue(m *consumerMember) []byte {
	w := newFlexValue()
	w.int32(m.epoch)
	w.int32(m.previousEpoch)
	w.int8(int8(m.state))
	w.partitions(m.assigned)
	w.partitions(m.revoking)
	w.noTags()
	return w.b
}

// decodeConsumerRecord decodes the record of a consumer group key (kinds
// 3-8, read from key after its version); value nil is a tombstone.
// Errors wrap ErrBadRecord or ErrUnknownRecord.
func decodeConsumerRecord(kind int16, key, value []byte) (string, consumerRecord, error) {
	kr := &flexReader{b: key[2:]}
	group := readKeyString(kr)
	rec := consumerRecord{kind: kind}
	switch kind {
	case keyConsumerMemberV5, keyConsumerTargetMemberV7, keyConsumerCurrentMemberV8:
		rec.member = readKeyString(kr)
	}
	if kr.err != nil || len(kr.b) != 0 {
		return "", rec, fmt.Errorf("%w: consumer group key of type %d", ErrBadRecord, kind)
	}
	if value == nil {
		rec.tombstone = true
		return group, rec, nil
	}
	r := &flexReader{b: value}
	if v := r.int16(); r.err == nil && v != consumerValueV0 {
		return "", rec, fmt.Errorf("%w: consumer group value of type %d, version %d", ErrUnknownRecord, kind, v)
	}
	switch kind {
	case keyConsumerMetadataV3, keyConsumerTargetMetadataV6:
		rec.epoch = r.int32()
	case keyConsumerPartitionMetadataV4:
		rec.topics = make(map[string]TopicMeta)
		n := r.arrayLen(22)
		for range n {
			t := TopicMeta{ID: r.uuid(), Name: r.str(), Partitions: r.int32()}
			for m := r.arrayLen(6); m > 0; m-- { // rack metadata, unused
				r.int32()
				for k := r.arrayLen(1); k > 0; k-- {
					r.str()
				}
				r.skipTags()
			}
			r.skipTags()
			rec.topics[t.Name] = t
		}
	case keyConsumerMemberV5:
		m := &consumerMember{id: rec.member}
		m.instanceID = r.nullableStr()
		m.rackID = r.nullableStr()
		m.clientID = r.str()
		m.clientHost = r.str()
		for n := r.arrayLen(1); n > 0; n-- {
			m.topics = append(m.topics, r.str())
		}
		if re := r.nullableStr(); re != nil {
			m.regex = *re
		}
		m.rebalanceTimeout = msDuration(r.int32())
		if a := r.nullableStr(); a != nil {
			m.assignor = *a
		}
		r.readTags(func(tag int, data []byte) {
			if tag != classicMemberMetadataTag {
				return
			}
			cm, err := readClassicMember(data)
			if err != nil {
				r.fail(err)
				return
			}
			m.classic = cm
		})
		rec.memberMeta = m
		if r.err != nil {
			return "", rec, fmt.Errorf("%w: consumer group value of type %d of %s: %v", ErrBadRecord, kind, group, r.err)
		}
		return group, rec, nil
	case keyConsumerTargetMemberV7:
		rec.target = r.partitions()
	case keyConsumerCurrentMemberV8:
		m := &consumerMember{id: rec.member}
		m.epoch = r.int32()
		m.previousEpoch = r.int32()
		m.state = memberState(r.int8())
		m.assigned = r.partitions()
		m.revoking = r.partitions()
		rec.current = m
	}
	r.skipTags()
	if r.err != nil {
		return "", rec, fmt.Errorf("%w: consumer group value of type %d of %s: %v", ErrBadRecord, kind, group, r.err)
	}
	return group, rec, nil
}

func msDuration(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

func readKeyString(r *flexReader) string {
	n := int(be16(r.take(2)))
	return string(r.take(n))
}
