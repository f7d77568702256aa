package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

// Record format versions in __consumer_offsets. They are Kafka's own (the
// OffsetCommitKey/Value and GroupMetadataKey/Value schemas, encoded by
// kmsg), so the first int16 of a key says what the record is and the first
// int16 of a value says how it is laid out. Stored data depends on them:
// never change or reuse them. doc.go draws the layouts.
const (
	keyOffsetV0 int16 = 0 // offset commit key (accepted, never written)
	keyOffsetV1 int16 = 1 // offset commit key (written)
	keyGroupV2  int16 = 2 // group metadata key

	valueOffsetV1 int16 = 1 // offset value with an explicit expire timestamp
	valueOffsetV3 int16 = 3 // offset value with the committed leader epoch
	valueGroupV3  int16 = 3 // group metadata value with instance ids

	maxValueVersion int16 = 4 // highest value version kmsg decodes

	// maxStringLen is the longest string the schemas' int16 lengths hold.
	maxStringLen = math.MaxInt16
)

// Errors met while decoding the records of __consumer_offsets.
var (
	// ErrUnknownRecord is a record whose key or value version this code
	// does not know (written by a newer version, or not by us at all).
	ErrUnknownRecord = errors.New("group: unknown record version in __consumer_offsets")
	// ErrBadRecord is a record whose key or value does not decode.
	ErrBadRecord = errors.New("group: malformed record in __consumer_offsets")
)

// offsetEntry is one committed offset as the coordinator keeps and stores it.
type offsetEntry struct {
	offset      int64
	leaderEpoch int32  // -1 when the client gave none
	metadata    string // never null on the wire: "" when none
	commitTime  int64  // ms since the epoch
	expireTime  int64  // ms since the epoch; -1: expiry by OffsetsRetention

	// at is the log offset of the first record of the batch that holds
	// the commit, -1 before it is appended; it orders a transactional
	// commit completed by its marker against plain commits (never stored:
	// the log position is the record's own).
	at int64
}

// kv is one record's key and value; a nil value is a tombstone.
type kv struct{ key, value []byte }

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: keyOffsetV1, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func offsetValue(e offsetEntry) []byte {
	v := kmsg.OffsetCommitValue{
		Version:         valueOffsetV3,
		Offset:          e.offset,
		LeaderEpoch:     e.leaderEpoch,
		Metadata:        e.metadata,
		CommitTimestamp: e.commitTime,
	}
	if e.expireTime >= 0 {
		// Only v1 carries an expire timestamp (commits of OffsetCommit
		// v2-v4 with a retention time); it has no leader epoch.
		v.Version = valueOffsetV1
		v.ExpireTimestamp = e.expireTime
	}
	return v.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: keyGroupV2, Group: group}
	return k.AppendTo(nil)
}

// buildBatch encodes records as one uncompressed record batch v2 with
// timestamp ts (ms). The log gives it its offsets on Append.
func buildBatch(ts int64, recs []kv) ([]byte, error) {
	rs := make([]segment.Record, len(recs))
	for i, r := range recs {
		rs[i] = segment.Record{Timestamp: ts, Key: r.key, Value: r.value}
	}
	return segment.BuildBatch(segment.BatchSpec{PartitionLeaderEpoch: -1, Records: rs})
}

// logRecord is one decoded record of __consumer_offsets.
type logRecord struct {
	group string

	// Offset records: topic and partition; offset is nil for a tombstone.
	isOffset  bool
	topic     string
	partition int32
	offset    *offsetEntry

	// Group records: meta is nil for a tombstone.
	meta *kmsg.GroupMetadataValue

	// Consumer group records (KIP-848), of key types 3-8.
	consumer *consumerRecord

	// Share group records (KIP-932), of key types 10-15.
	share *shareRecord
}

// decodeRecord decodes one record. Errors wrap ErrUnknownRecord or
// ErrBadRecord.
func decodeRecord(key, value []byte) (logRecord, error) {
	var r logRecord
	if len(key) < 2 {
		return r, fmt.Errorf("%w: key of %d bytes", ErrBadRecord, len(key))
	}
	switch ver := int16(binary.BigEndian.Uint16(key)); ver {
	case keyOffsetV0, keyOffsetV1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return r, fmt.Errorf("%w: offset key: %v", ErrBadRecord, err)
		}
		r.isOffset, r.group, r.topic, r.partition = true, k.Group, k.Topic, k.Partition
		if value == nil {
			return r, nil
		}
		if err := checkValueVersion(value); err != nil {
			return r, err
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			return r, fmt.Errorf("%w: offset value of %s/%s/%d: %v", ErrBadRecord, k.Group, k.Topic, k.Partition, err)
		}
		e := offsetEntry{offset: v.Offset, leaderEpoch: -1, metadata: v.Metadata, commitTime: v.CommitTimestamp, expireTime: -1}
		if v.Version >= 3 {
			e.leaderEpoch = v.LeaderEpoch
		}
		if v.Version == valueOffsetV1 && v.ExpireTimestamp >= 0 {
			e.expireTime = v.ExpireTimestamp
		}
		r.offset = &e
		return r, nil
	case keyGroupV2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return r, fmt.Errorf("%w: group key: %v", ErrBadRecord, err)
		}
		r.group = k.Group
		if value == nil {
			return r, nil
		}
		if err := checkValueVersion(value); err != nil {
			return r, err
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(value); err != nil {
			return r, fmt.Errorf("%w: group value of %s: %v", ErrBadRecord, k.Group, err)
		}
		r.meta = &v
		return r, nil
	case keyConsumerMetadataV3, keyConsumerPartitionMetadataV4, keyConsumerMemberV5,
		keyConsumerTargetMetadataV6, keyConsumerTargetMemberV7, keyConsumerCurrentMemberV8:
		group, rec, err := decodeConsumerRecord(ver, key, value)
		if err != nil {
			return r, err
		}
		r.group, r.consumer = group, &rec
		return r, nil
	case keyShareMemberV10, keyShareMetadataV11, keyShareTargetMetadataV12,
		keyShareTargetMemberV13, keyShareCurrentMemberV14, keyShareStatePartitionsV15:
		group, rec, err := decodeShareRecord(ver, key, value)
		if err != nil {
			return r, err
		}
		r.group, r.share = group, &rec
		return r, nil
	default:
		return r, fmt.Errorf("%w: key version %d", ErrUnknownRecord, ver)
	}
}

func checkValueVersion(value []byte) error {
	if len(value) < 2 {
		return fmt.Errorf("%w: value of %d bytes", ErrBadRecord, len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 || v > maxValueVersion {
		return fmt.Errorf("%w: value version %d", ErrUnknownRecord, v)
	}
	return nil
}
