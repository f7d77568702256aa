package txn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func sampleMetadata() Metadata {
	return Metadata{
		TransactionalID: "tx-1", ProducerID: 4294967296 + 7, ProducerEpoch: 3,
		LastProducerID: -1, LastProducerEpoch: -1, TimeoutMs: 60000, State: Ongoing,
		Partitions: map[TopicPartition]struct{}{{"a", 1}: {}, {"a", 0}: {}, {"b", 2}: {}},
		StartMs:    1700000000000, LastUpdateMs: 1700000000500, NextProducerID: -1,
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for i, md := range []Metadata{
		sampleMetadata(),
		{TransactionalID: "empty", ProducerID: 1, ProducerEpoch: 0, LastProducerID: -1, LastProducerEpoch: -1, TimeoutMs: 1, State: Empty, Partitions: map[TopicPartition]struct{}{}, StartMs: -1, LastUpdateMs: 5, NextProducerID: -1},
		{TransactionalID: "ü-ñ", ProducerID: 9, ProducerEpoch: 32766, LastProducerID: -1, LastProducerEpoch: -1, TimeoutMs: 900000, State: PrepareCommit, Partitions: map[TopicPartition]struct{}{{"__consumer_offsets", 49}: {}}, StartMs: 1, LastUpdateMs: 2, NextProducerID: -1},
		// Transaction version 2, its epoch overflowed: value v1 with
		// the tagged fields.
		{TransactionalID: "tv2", ProducerID: 9, ProducerEpoch: 32767, LastProducerID: 8, LastProducerEpoch: -1, TimeoutMs: 900000, State: PrepareAbort, Partitions: map[TopicPartition]struct{}{{"t", 0}: {}}, StartMs: 1, LastUpdateMs: 2, NextProducerID: 10, ClientVersion: TransactionVersion2},
	} {
		id, got, err := DecodeRecord(EncodeKey(md.TransactionalID), EncodeValue(md))
		if err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		if id != md.TransactionalID || !reflect.DeepEqual(*got, md) {
			t.Errorf("#%d: got %q %+v, want %+v", i, id, *got, md)
		}
	}
	id, got, err := DecodeRecord(EncodeKey("gone"), nil)
	if err != nil || id != "gone" || got != nil {
		t.Errorf("tombstone: got %q %v %v", id, got, err)
	}
}

// TestRecordLayout checks the bytes against Kafka's TransactionLogKey v0
// and TransactionLogValue v0 schemas, field by field.
func TestRecordLayout(t *testing.T) {
	key := EncodeKey("ab")
	if want := []byte{0, 0, 0, 2, 'a', 'b'}; !bytes.Equal(key, want) {
		t.Errorf("key: got %x, want %x", key, want)
	}
	md := sampleMetadata()
	md.Partitions = map[TopicPartition]struct{}{{"t", 5}: {}}
	v := EncodeValue(md)
	var want []byte
	want = binary.BigEndian.AppendUint16(want, 0) // version
	want = binary.BigEndian.AppendUint64(want, uint64(md.ProducerID))
	want = binary.BigEndian.AppendUint16(want, uint16(md.ProducerEpoch))
	want = binary.BigEndian.AppendUint32(want, uint32(md.TimeoutMs))
	want = append(want, byte(Ongoing))
	want = binary.BigEndian.AppendUint32(want, 1) // one topic
	want = append(want, 0, 1, 't')
	want = binary.BigEndian.AppendUint32(want, 1) // one partition
	want = binary.BigEndian.AppendUint32(want, 5)
	want = binary.BigEndian.AppendUint64(want, uint64(md.LastUpdateMs))
	want = binary.BigEndian.AppendUint64(want, uint64(md.StartMs))
	if !bytes.Equal(v, want) {
		t.Errorf("value:\n got %x\nwant %x", v, want)
	}
	// Empty writes a null partition array, as Kafka.
	md.State, md.Partitions = Empty, nil
	v = EncodeValue(md)
	if got := int32(binary.BigEndian.Uint32(v[2+8+2+4+1:])); got != -1 {
		t.Errorf("Empty: partition array length %d, want -1 (null)", got)
	}
}

// TestDecodeV1 reads a flexible TransactionLogValue v1, as Kafka writes
// with transaction.version 1+.
func TestDecodeV1(t *testing.T) {
	v := kmsg.NewTxnMetadataValue()
	v.Version, v.ProducerID, v.ProducerEpoch, v.TimeoutMillis, v.State = 1, 5, 2, 1000, kmsg.TransactionState(PrepareAbort)
	v.Topics = []kmsg.TxnMetadataValueTopic{{Topic: "x", Partitions: []int32{0, 1}}}
	v.LastUpdateTimestamp, v.StartTimestamp = 10, 9
	_, md, err := DecodeRecord(EncodeKey("v1"), v.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	if md.State != PrepareAbort || len(md.Partitions) != 2 || md.ProducerEpoch != 2 {
		t.Errorf("got %+v", md)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := EncodeValue(sampleMetadata())
	badState := bytes.Clone(good)
	badState[2+8+2+4] = 9
	fence := bytes.Clone(good)
	fence[2+8+2+4] = byte(PrepareEpochFence)
	for i, tt := range []struct {
		key, value []byte
		want       error
	}{
		{[]byte{0}, good, ErrBadRecord},
		{[]byte{0, 1, 0, 0}, good, ErrUnknownRecord},
		{[]byte{0, 0, 0, 9, 'x'}, good, ErrBadRecord},
		{EncodeKey("a"), []byte{0}, ErrBadRecord},
		{EncodeKey("a"), []byte{0, 2, 0}, ErrUnknownRecord},
		{EncodeKey("a"), good[:10], ErrBadRecord},
		{EncodeKey("a"), badState, ErrBadRecord},
		{EncodeKey("a"), fence, ErrBadRecord},
	} {
		if _, _, err := DecodeRecord(tt.key, tt.value); !errors.Is(err, tt.want) {
			t.Errorf("#%d: got %v, want %v", i, err, tt.want)
		}
	}
}

// FuzzDecodeRecord: DecodeRecord never panics; what it decodes encodes
// back to a record that decodes to the same metadata.
func FuzzDecodeRecord(f *testing.F) {
	md := sampleMetadata()
	f.Add(EncodeKey(md.TransactionalID), EncodeValue(md))
	md.State, md.Partitions = Empty, map[TopicPartition]struct{}{}
	f.Add(EncodeKey("e"), EncodeValue(md))
	f.Add(EncodeKey("t"), []byte(nil))
	f.Add([]byte{0, 0, 0xff, 0xff}, []byte{0, 1, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		id, got, err := DecodeRecord(key, value)
		if err != nil || got == nil {
			return
		}
		id2, again, err := DecodeRecord(EncodeKey(id), EncodeValue(*got))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if got.State == Empty {
			got.Partitions = map[TopicPartition]struct{}{} // Empty stores none
		}
		if id2 != id || !reflect.DeepEqual(*again, *got) {
			t.Fatalf("round trip: got %q %+v, want %q %+v", id2, *again, id, *got)
		}
	})
}
