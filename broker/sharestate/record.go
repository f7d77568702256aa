package sharestate

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Record types and versions of __share_group_state, as Kafka's
// share-coordinator writes them (the key's version is the record type).
// Never change them: they are on disk.
const (
	keySnapshot   int16 = 0 // ShareSnapshotKey
	keyUpdate     int16 = 1 // ShareUpdateKey
	valueVersion0 int16 = 0 // ShareSnapshotValue, ShareUpdateValue

	// tagDeliveryCompleteCount is the tagged field of both values that
	// holds the delivery-complete count (WriteShareGroupState v1).
	tagDeliveryCompleteCount = 0

	// maxBatches bounds the state batches a decoded value may hold.
	maxBatches = 1 << 20
)

// ErrCorrupt is wrapped by every decode error: the bytes are not a record
// of __share_group_state this build reads.
var ErrCorrupt = errors.New("sharestate: corrupt record")

// Key names one share partition: a group's view of one topic partition.
type Key struct {
	GroupID   string
	TopicID   [16]byte
	Partition int32
}

// StateBatch is the delivery state of the offsets First..Last.
type StateBatch struct {
	First, Last   int64
	DeliveryState int8
	DeliveryCount int16
}

// Delivery states of a StateBatch.
const (
	Available int8 = 0
	Acked     int8 = 2
	Archived  int8 = 4
)

// value is a decoded ShareSnapshotValue or ShareUpdateValue (an update
// has no state epoch: StateEpoch is then -1).
type value struct {
	SnapshotEpoch         uint16
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32 // -1: not known
	Batches               []StateBatch
}

// encodeKey encodes a record key: the type, then the key fields.
func encodeKey(typ int16, k Key) []byte {
	b := kbin.AppendInt16(nil, typ)
	b = kbin.AppendString(b, k.GroupID)
	b = kbin.AppendUuid(b, k.TopicID)
	return kbin.AppendInt32(b, k.Partition)
}

// decodeKey decodes a record key.
func decodeKey(b []byte) (typ int16, k Key, err error) {
	r := kbin.Reader{Src: b}
	typ = r.Int16()
	if r.Ok() && typ != keySnapshot && typ != keyUpdate {
		return 0, Key{}, fmt.Errorf("%w: unknown key type %d", ErrCorrupt, typ)
	}
	k.GroupID = r.String()
	k.TopicID = r.Uuid()
	k.Partition = r.Int32()
	if err := r.Complete(); err != nil {
		return 0, Key{}, fmt.Errorf("%w: key: %v", ErrCorrupt, err)
	}
	return typ, k, nil
}

// encodeValue encodes the value of a record of type typ (version 0,
// flexible: compact arrays and tagged fields).
func encodeValue(typ int16, v value) []byte {
	b := kbin.AppendInt16(nil, valueVersion0)
	b = kbin.AppendUint16(b, v.SnapshotEpoch)
	if typ == keySnapshot {
		b = kbin.AppendInt32(b, v.StateEpoch)
	}
	b = kbin.AppendInt32(b, v.LeaderEpoch)
	b = kbin.AppendInt64(b, v.StartOffset)
	b = kbin.AppendCompactArrayLen(b, len(v.Batches))
	for _, sb := range v.Batches {
		b = kbin.AppendInt64(b, sb.First)
		b = kbin.AppendInt64(b, sb.Last)
		b = kbin.AppendInt8(b, sb.DeliveryState)
		b = kbin.AppendInt16(b, sb.DeliveryCount)
		b = kbin.AppendUvarint(b, 0) // no tagged fields
	}
	if v.DeliveryCompleteCount < 0 {
		return kbin.AppendUvarint(b, 0)
	}
	b = kbin.AppendUvarint(b, 1)
	b = kbin.AppendUvarint(b, tagDeliveryCompleteCount)
	b = kbin.AppendUvarint(b, 4)
	return kbin.AppendInt32(b, v.DeliveryCompleteCount)
}

// decodeValue decodes the value of a record of type typ; unknown tagged
// fields are skipped, as Kafka's readers skip them.
func decodeValue(typ int16, b []byte) (value, error) {
	r := kbin.Reader{Src: b}
	v := value{StateEpoch: -1, DeliveryCompleteCount: -1}
	if ver := r.Int16(); r.Ok() && ver != valueVersion0 {
		return value{}, fmt.Errorf("%w: value version %d", ErrCorrupt, ver)
	}
	v.SnapshotEpoch = r.Uint16()
	if typ == keySnapshot {
		v.StateEpoch = r.Int32()
	}
	v.LeaderEpoch = r.Int32()
	v.StartOffset = r.Int64()
	n := r.CompactArrayLen()
	if n < 0 || n > maxBatches || int(n)*20 > len(r.Src) {
		return value{}, fmt.Errorf("%w: %d state batches", ErrCorrupt, n)
	}
	if n > 0 {
		v.Batches = make([]StateBatch, 0, n)
	}
	for i := int32(0); i < n && r.Ok(); i++ {
		sb := StateBatch{First: r.Int64(), Last: r.Int64(), DeliveryState: r.Int8(), DeliveryCount: r.Int16()}
		if err := skipTags(&r, nil); err != nil {
			return value{}, err
		}
		v.Batches = append(v.Batches, sb)
	}
	if err := skipTags(&r, func(tag uint32, data []byte) {
		if tag == tagDeliveryCompleteCount && len(data) == 4 {
			v.DeliveryCompleteCount = max((&kbin.Reader{Src: data}).Int32(), -1) // negative: not known
		}
	}); err != nil {
		return value{}, err
	}
	if err := r.Complete(); err != nil {
		return value{}, fmt.Errorf("%w: value: %v", ErrCorrupt, err)
	}
	return v, nil
}

// skipTags reads a tagged-field section, handing each field to fn.
func skipTags(r *kbin.Reader, fn func(tag uint32, data []byte)) error {
	n := r.Uvarint()
	if int(n) > len(r.Src) {
		return fmt.Errorf("%w: %d tagged fields", ErrCorrupt, n)
	}
	for i := uint32(0); i < n && r.Ok(); i++ {
		tag, size := r.Uvarint(), r.Uvarint()
		if int(size) > len(r.Src) {
			return fmt.Errorf("%w: tagged field of %d bytes", ErrCorrupt, size)
		}
		data := r.Span(int(size))
		if fn != nil && r.Ok() {
			fn(tag, data)
		}
	}
	if !r.Ok() {
		return fmt.Errorf("%w: truncated tagged fields", ErrCorrupt)
	}
	return nil
}

// decodeRecord decodes one record of __share_group_state: its type, key
// and value (nil for a tombstone).
func decodeRecord(key, val []byte) (int16, Key, *value, error) {
	typ, k, err := decodeKey(key)
	if err != nil {
		return 0, Key{}, nil, err
	}
	if val == nil {
		return typ, k, nil, nil
	}
	v, err := decodeValue(typ, val)
	if err != nil {
		return 0, Key{}, nil, err
	}
	return typ, k, &v, nil
}
