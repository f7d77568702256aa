package sharestate

import (
	"bytes"
	"reflect"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	k := Key{GroupID: "g", TopicID: [16]byte{1}, Partition: 3}
	for _, typ := range []int16{keySnapshot, keyUpdate} {
		gotTyp, gotK, err := decodeKey(encodeKey(typ, k))
		if err != nil || gotTyp != typ || gotK != k {
			t.Errorf("key %d: got %d %+v %v", typ, gotTyp, gotK, err)
		}
		for _, v := range []value{
			{SnapshotEpoch: 7, StateEpoch: 2, LeaderEpoch: 5, StartOffset: 100, DeliveryCompleteCount: -1,
				Batches: []StateBatch{{100, 109, Acked, 1}, {110, 110, Available, 3}}},
			{SnapshotEpoch: 0, StateEpoch: 0, LeaderEpoch: -1, StartOffset: -1, DeliveryCompleteCount: 42},
		} {
			if typ == keyUpdate {
				v.StateEpoch = -1
			}
			got, err := decodeValue(typ, encodeValue(typ, v))
			if err != nil || !reflect.DeepEqual(got, v) {
				t.Errorf("value %d: got %+v %v, want %+v", typ, got, err, v)
			}
		}
	}
}

// TestRecordBytes pins the bytes of a snapshot value (the layout in
// doc.go).
func TestRecordBytes(t *testing.T) {
	got := encodeValue(keySnapshot, value{SnapshotEpoch: 1, StateEpoch: 2, LeaderEpoch: 3, StartOffset: 4, DeliveryCompleteCount: -1,
		Batches: []StateBatch{{5, 6, Acked, 1}}})
	want := []byte{0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 2,
		0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 6, 2, 0, 1, 0, 0}
	if !bytes.Equal(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

// FuzzDecodeRecord: decoding never panics, and a record that decodes
// encodes back to bytes that decode to the same.
func FuzzDecodeRecord(f *testing.F) {
	k := Key{GroupID: "group", TopicID: [16]byte{7}, Partition: 1}
	v := value{SnapshotEpoch: 1, StateEpoch: 2, LeaderEpoch: 3, StartOffset: 4, DeliveryCompleteCount: 9, Batches: []StateBatch{{5, 6, Acked, 1}}}
	f.Add(encodeKey(keySnapshot, k), encodeValue(keySnapshot, v))
	v.StateEpoch = -1
	f.Add(encodeKey(keyUpdate, k), encodeValue(keyUpdate, v))
	f.Add(encodeKey(keyUpdate, k), []byte(nil))
	f.Add([]byte{0, 9}, []byte{0, 0})
	f.Fuzz(func(t *testing.T, key, val []byte) {
		typ, k, v, err := decodeRecord(key, val)
		if err != nil {
			return
		}
		var val2 []byte
		if v != nil {
			val2 = encodeValue(typ, *v)
		}
		typ2, k2, v2, err := decodeRecord(encodeKey(typ, k), val2)
		if err != nil || typ2 != typ || k2 != k || !reflect.DeepEqual(v2, v) {
			t.Fatalf("re-decode: %d %+v %+v %v, want %d %+v %+v", typ2, k2, v2, err, typ, k, v)
		}
	})
}
