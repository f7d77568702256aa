package group

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// consumerRecordSamples are one record of each consumer group type.
func consumerRecordSamples() []kv {
	inst, rack := "i", "r"
	id := [16]byte{1, 2, 3}
	m := &consumerMember{
		id: "m", instanceID: &inst, rackID: &rack, clientID: "c", clientHost: "/1.2.3.4",
		topics: []string{"a", "b"}, regex: "x.*", rebalanceTimeout: 30 * time.Second, assignor: AssignorRange,
		epoch: 5, previousEpoch: 4, state: memberUnrevoked,
		assigned: partitionSet{{id, 0}: {}, {id, 2}: {}},
		revoking: partitionSet{{id, 1}: {}},
	}
	return []kv{
		{consumerKey(keyConsumerMetadataV3, "g", ""), consumerEpochValue(7)},
		{consumerKey(keyConsumerPartitionMetadataV4, "g", ""), consumerTopicsValue(map[string]TopicMeta{"a": {Name: "a", ID: id, Partitions: 3}})},
		{consumerKey(keyConsumerMemberV5, "g", "m"), consumerMemberValue(m)},
		{consumerKey(keyConsumerTargetMetadataV6, "g", ""), consumerEpochValue(6)},
		{consumerKey(keyConsumerTargetMemberV7, "g", "m"), consumerTargetValue(m.assigned)},
		{consumerKey(keyConsumerCurrentMemberV8, "g", "m"), consumerCurrentValue(m)},
	}
}

// reencode encodes the value of a decoded record again.
func reencode(c *consumerRecord) []byte {
	switch c.kind {
	case keyConsumerMetadataV3, keyConsumerTargetMetadataV6:
		return consumerEpochValue(c.epoch)
	case keyConsumerPartitionMetadataV4:
		return consumerTopicsValue(c.topics)
	case keyConsumerMemberV5:
		return consumerMemberValue(c.memberMeta)
	case keyConsumerTargetMemberV7:
		return consumerTargetValue(c.target)
	case keyConsumerCurrentMemberV8:
		return consumerCurrentValue(c.current)
	}
	return nil
}

func TestConsumerRecordsRoundTrip(t *testing.T) {
	for i, s := range consumerRecordSamples() {
		r, err := decodeRecord(s.key, s.value)
		if err != nil || r.consumer == nil || r.group != "g" {
			t.Fatalf("#%d: got %+v, %v", i, r, err)
		}
		again := reencode(r.consumer)
		if !bytes.Equal(again, s.value) {
			t.Errorf("#%d: re-encoded %x, want %x", i, again, s.value)
		}
		if r, err := decodeRecord(s.key, nil); err != nil || !r.consumer.tombstone {
			t.Errorf("#%d: tombstone: %+v, %v", i, r, err)
		}
	}
	// Kafka's layout: version 0, the epoch, an empty tag section.
	if v := consumerEpochValue(7); !bytes.Equal(v, []byte{0, 0, 0, 0, 0, 7, 0}) {
		t.Errorf("epoch value: %x", v)
	}
	if k := consumerKey(keyConsumerTargetMemberV7, "g", "m"); !bytes.Equal(k, []byte{0, 7, 0, 1, 'g', 0, 1, 'm'}) {
		t.Errorf("target member key: %x", k)
	}
	for i, tc := range []struct {
		key, value []byte
		want       error
	}{
		{consumerKey(keyConsumerMetadataV3, "g", ""), []byte{0, 0, 0}, ErrBadRecord},
		{consumerKey(keyConsumerMetadataV3, "g", ""), []byte{0, 1, 0, 0, 0, 7, 0}, ErrUnknownRecord},
		{[]byte{0, 5, 0, 1, 'g'}, nil, ErrBadRecord},
		{consumerKey(keyConsumerTargetMemberV7, "g", "m"), []byte{0, 0, 0xff, 0xff, 0xff, 0x0f}, ErrBadRecord},
	} {
		if _, err := decodeRecord(tc.key, tc.value); !errors.Is(err, tc.want) {
			t.Errorf("#%d: got %v, want %v", i, err, tc.want)
		}
	}
}

// FuzzConsumerRecord: decoding any key and value never panics, and a
// value that decodes re-encodes to a value that decodes the same way.
func FuzzConsumerRecord(f *testing.F) {
	for _, s := range consumerRecordSamples() {
		f.Add(s.key, s.value)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := decodeRecord(key, value)
		if err != nil || r.consumer == nil || r.consumer.tombstone {
			return
		}
		again := reencode(r.consumer)
		r2, err := decodeRecord(key, again)
		if err != nil {
			t.Fatalf("re-encoded value does not decode: %v", err)
		}
		third := reencode(r2.consumer)
		if !bytes.Equal(again, third) {
			t.Fatalf("re-encoding is not stable: %x then %x", again, third)
		}
	})
}
