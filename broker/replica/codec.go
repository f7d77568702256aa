package replica

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec used for every other message
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stratastream/strata/broker/bufpool"
	"github.com/stratastream/strata/proto/replpb"
)

// The replication service's gRPC codec. On the wire it is protobuf, as
// gRPC's default codec, under the same name, so brokers with either codec
// replicate from each other; what differs is the copies of the record
// batches, which are nearly all the bytes:
//
//   - the leader encodes a LeaderMessage around the batches it read from
//     its log without copying them into the message: the encoded message
//     is a list of buffers, the fields' encoding between the batches
//     themselves, which gRPC writes out as they are;
//   - the follower decodes a leaderFrame (a LeaderMessage received with
//     RecvMsg) by copying the message once, from gRPC's frame buffers into
//     one buffer from bufpool, and pointing every PartitionData's Records
//     into it; the fetcher gives the buffer back once it has appended the
//     batches (leaderFrame.release).
//
// gRPC's default codec copies the batches twice on each side (into and
// out of the marshaled message, and into and out of one contiguous
// buffer), every copy into fresh or zeroed memory. Every other message
// of the service (FollowerMessage, EpochEnds, KafkaMessage) goes to that
// codec unchanged.
type replicationCodec struct{}

var defaultCodec = encoding.GetCodecV2("proto")

// Name is the default codec's, so the content-subtype on the wire is
// unchanged.
func (replicationCodec) Name() string { return "proto" }

// Marshal implements encoding.CodecV2.
func (replicationCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*replpb.LeaderMessage); ok {
		return encodeLeaderMessage(m), nil
	}
	return defaultCodec.Marshal(v)
}

// Unmarshal implements encoding.CodecV2.
func (replicationCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*leaderFrame); ok {
		return f.decode(data)
	}
	return defaultCodec.Unmarshal(data, v)
}

// Field numbers of LeaderMessage and PartitionData (replication.proto).
const (
	fieldLeaderPartitions = 1

	fieldTopic          = 1
	fieldPartition      = 2
	fieldErrorCode      = 3
	fieldErrorMessage   = 4
	fieldLeaderEpoch    = 5
	fieldHighWatermark  = 6
	fieldLogStartOffset = 7
	fieldLogEndOffset   = 8
	fieldRecords        = 9
)

// appendPartitionFields appends pd's fields other than records, as
// protobuf encodes them (proto3: a field at its zero value is left out;
// an int32 is sign-extended to 64 bits).
func appendPartitionFields(b []byte, pd *replpb.PartitionData) []byte {
	str := func(num protowire.Number, s string) {
		if s != "" {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendString(b, s)
		}
	}
	varint := func(num protowire.Number, v int64) {
		if v != 0 {
			b = protowire.AppendTag(b, num, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(v))
		}
	}
	str(fieldTopic, pd.Topic)
	varint(fieldPartition, int64(pd.Partition))
	varint(fieldErrorCode, int64(pd.ErrorCode))
	str(fieldErrorMessage, pd.ErrorMessage)
	varint(fieldLeaderEpoch, int64(pd.LeaderEpoch))
	varint(fieldHighWatermark, pd.HighWatermark)
	varint(fieldLogStartOffset, pd.LogStartOffset)
	varint(fieldLogEndOffset, pd.LogEndOffset)
	return b
}

// encodeLeaderMessage encodes m as protobuf: the fields into small
// buffers, each PartitionData's Records as a buffer of its own, not
// copied. The caller must not change the records until gRPC has written
// them (the leader never does: each read is a new buffer).
func encodeLeaderMessage(m *replpb.LeaderMessage) mem.BufferSlice {
	var out mem.BufferSlice
	var fields []byte
	for _, pd := range m.Partitions {
		own := appendPartitionFields(nil, pd)
		size := len(own)
		if len(pd.Records) > 0 {
			size += protowire.SizeTag(fieldRecords) + protowire.SizeBytes(len(pd.Records))
		}
		fields = protowire.AppendTag(fields, fieldLeaderPartitions, protowire.BytesType)
		fields = protowire.AppendVarint(fields, uint64(size))
		fields = append(fields, own...)
		if len(pd.Records) == 0 {
			continue
		}
		fields = protowire.AppendTag(fields, fieldRecords, protowire.BytesType)
		fields = protowire.AppendVarint(fields, uint64(len(pd.Records)))
		out = append(out, mem.SliceBuffer(fields), mem.SliceBuffer(pd.Records))
		fields = fields[len(fields):]
	}
	if len(fields) > 0 {
		out = append(out, mem.SliceBuffer(fields))
	}
	return out
}

// leaderFrame is a LeaderMessage as the follower receives it (RecvMsg
// with the replication codec): the Records of its partitions point into
// buf, which release gives back.
type leaderFrame struct {
	msg replpb.LeaderMessage
	buf []byte
}

// errBadLeaderMessage wraps a LeaderMessage that is not valid protobuf of
// its schema.
var errBadLeaderMessage = errors.New("replication: malformed LeaderMessage")

// decode reads data into f, as proto.Unmarshal would (unknown fields
// skipped, a repeated scalar field's last value kept, strings checked
// for UTF-8), copying data once into f.buf.
func (f *leaderFrame) decode(data mem.BufferSlice) error {
	f.release()
	f.buf = bufpool.Get(data.Len())
	data.CopyTo(f.buf)
	b := f.buf
	for len(b) > 0 {
		num, typ, n, err := consumeTag(b, "message")
		if err != nil {
			return err
		}
		b = b[n:]
		if num == fieldLeaderPartitions && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: partitions: %v", errBadLeaderMessage, protowire.ParseError(n))
			}
			pd := &replpb.PartitionData{}
			if err := decodePartitionData(v, pd); err != nil {
				return err
			}
			f.msg.Partitions = append(f.msg.Partitions, pd)
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", errBadLeaderMessage, num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}

// consumeTag is protowire.ConsumeTag refusing, as proto.Unmarshal does,
// field numbers above protowire.MaxValidNumber; n is the tag's length.
func consumeTag(b []byte, what string) (num protowire.Number, typ protowire.Type, n int, err error) {
	num, typ, n = protowire.ConsumeTag(b)
	switch {
	case n < 0:
		return 0, 0, 0, fmt.Errorf("%w: %s: %v", errBadLeaderMessage, what, protowire.ParseError(n))
	case num > protowire.MaxValidNumber:
		return 0, 0, 0, fmt.Errorf("%w: %s: field number %d is out of range", errBadLeaderMessage, what, num)
	}
	return num, typ, n, nil
}

// decodePartitionData reads one PartitionData; Records points into b.
func decodePartitionData(b []byte, pd *replpb.PartitionData) error {
	for len(b) > 0 {
		num, typ, n, err := consumeTag(b, "partition data")
		if err != nil {
			return err
		}
		b = b[n:]
		switch {
		case typ == protowire.VarintType && num >= fieldPartition && num <= fieldLogEndOffset && num != fieldErrorMessage:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", errBadLeaderMessage, num, protowire.ParseError(n))
			}
			b = b[n:]
			switch num {
			case fieldPartition:
				pd.Partition = int32(v)
			case fieldErrorCode:
				pd.ErrorCode = int32(v)
			case fieldLeaderEpoch:
				pd.LeaderEpoch = int32(v)
			case fieldHighWatermark:
				pd.HighWatermark = int64(v)
			case fieldLogStartOffset:
				pd.LogStartOffset = int64(v)
			case fieldLogEndOffset:
				pd.LogEndOffset = int64(v)
			}
		case typ == protowire.BytesType && (num == fieldTopic || num == fieldErrorMessage || num == fieldRecords):
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", errBadLeaderMessage, num, protowire.ParseError(n))
			}
			b = b[n:]
			if num == fieldRecords {
				pd.Records = v[:len(v):len(v)]
				continue
			}
			if !utf8.Valid(v) {
				return fmt.Errorf("%w: field %d is not UTF-8", errBadLeaderMessage, num)
			}
			if num == fieldTopic {
				pd.Topic = string(v)
			} else {
				pd.ErrorMessage = string(v)
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", errBadLeaderMessage, num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return nil
}

// release gives f's buffer back to bufpool and clears the message, whose
// Records pointed into it. The caller must hold no slice of the records.
func (f *leaderFrame) release() {
	if f.buf != nil {
		bufpool.Put(f.buf)
	}
	f.buf = nil
	f.msg.Partitions = nil
}
