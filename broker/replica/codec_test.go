package replica

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/stratastream/strata/proto/replpb"
)

// splitBuffers cuts b into buffers of random sizes, as gRPC hands a
// message received in several HTTP/2 frames to the codec.
func splitBuffers(r *rand.Rand, b []byte) mem.BufferSlice {
	var out mem.BufferSlice
	for len(b) > 0 {
		n := min(len(b), 1+r.IntN(64))
		out = append(out, mem.SliceBuffer(b[:n]))
		b = b[n:]
	}
	return out
}

// randomLeaderMessage has partitions with and without records, errors,
// negative numbers and zero values.
func randomLeaderMessage(r *rand.Rand) *replpb.LeaderMessage {
	m := &replpb.LeaderMessage{}
	for range r.IntN(5) {
		pd := &replpb.PartitionData{
			Topic:          []string{"", "t", "topic-ü"}[r.IntN(3)],
			Partition:      int32(r.IntN(3)) - 1,
			LeaderEpoch:    int32(r.IntN(5)) - 1,
			HighWatermark:  r.Int64N(1<<40) - 1,
			LogStartOffset: r.Int64N(3) - 1,
			LogEndOffset:   r.Int64N(1 << 50),
		}
		if r.IntN(4) == 0 {
			pd.ErrorCode, pd.ErrorMessage = int32(r.IntN(100)), "no longer the leader"
		}
		if r.IntN(3) > 0 {
			pd.Records = make([]byte, r.IntN(3000))
			for i := range pd.Records {
				pd.Records[i] = byte(r.Uint32())
			}
		}
		m.Partitions = append(m.Partitions, pd)
	}
	return m
}

// TestLeaderMessageCodecIsProtobuf: what the leader encodes is the
// protobuf gRPC's default codec reads, and what that codec writes is what
// the follower decodes, for messages split over any buffers; so brokers
// with either codec replicate from each other.
func TestLeaderMessageCodecIsProtobuf(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		m := randomLeaderMessage(r)
		enc := encodeLeaderMessage(m)
		got := &replpb.LeaderMessage{}
		if err := proto.Unmarshal(enc.Materialize(), got); err != nil || !proto.Equal(got, m) {
			t.Fatalf("message %d: proto.Unmarshal of the codec's encoding: %v\n got %v\nwant %v", i, err, got, m)
		}
		ref, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc.Materialize(), ref) {
			t.Fatalf("message %d: the codec's encoding differs from proto.Marshal's", i)
		}
		var f leaderFrame
		if err := (replicationCodec{}).Unmarshal(splitBuffers(r, ref), &f); err != nil || !proto.Equal(&f.msg, m) {
			t.Fatalf("message %d: decoding proto.Marshal's encoding: %v\n got %v\nwant %v", i, err, &f.msg, m)
		}
		f.release()
	}
}

// TestLeaderMessageCodecCoversSchema sets every field of PartitionData,
// found by reflection, to a value that is not its zero: a field added to
// replication.proto and not to the codec fails here.
func TestLeaderMessageCodecCoversSchema(t *testing.T) {
	if n := (&replpb.LeaderMessage{}).ProtoReflect().Descriptor().Fields().Len(); n != 1 {
		t.Fatalf("LeaderMessage has %d fields; the codec encodes only partitions", n)
	}
	for _, sign := range []int64{1, -1} {
		pd := &replpb.PartitionData{}
		rm := pd.ProtoReflect()
		fields := rm.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			switch fd.Kind() {
			case protoreflect.StringKind:
				rm.Set(fd, protoreflect.ValueOfString("v"+string(fd.Name())))
			case protoreflect.BytesKind:
				rm.Set(fd, protoreflect.ValueOfBytes([]byte("b"+string(fd.Name()))))
			case protoreflect.Int32Kind:
				rm.Set(fd, protoreflect.ValueOfInt32(int32(sign)*int32(fd.Number())))
			case protoreflect.Int64Kind:
				rm.Set(fd, protoreflect.ValueOfInt64(sign*int64(fd.Number())<<33))
			default:
				t.Fatalf("PartitionData field %s is of kind %v, which the codec does not encode", fd.Name(), fd.Kind())
			}
		}
		m := &replpb.LeaderMessage{Partitions: []*replpb.PartitionData{pd}}
		got := &replpb.LeaderMessage{}
		if err := proto.Unmarshal(encodeLeaderMessage(m).Materialize(), got); err != nil || !proto.Equal(got, m) {
			t.Fatalf("every field set: %v\n got %v\nwant %v", err, got, m)
		}
		ref, _ := proto.Marshal(m)
		var f leaderFrame
		if err := f.decode(mem.BufferSlice{mem.SliceBuffer(ref)}); err != nil || !proto.Equal(&f.msg, m) {
			t.Fatalf("decoding every field set: %v\n got %v\nwant %v", err, &f.msg, m)
		}
	}
}

// TestLeaderFrameReuse: a frame decoded after another holds only the
// second message, whatever the reused buffer held before.
func TestLeaderFrameReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var f leaderFrame
	for i := range 200 {
		m := randomLeaderMessage(r)
		ref, _ := proto.Marshal(m)
		if err := f.decode(splitBuffers(r, ref)); err != nil || !proto.Equal(&f.msg, m) {
			t.Fatalf("message %d: %v\n got %v\nwant %v", i, err, &f.msg, m)
		}
		if i%2 == 0 {
			f.release()
		}
	}
}

// FuzzLeaderFrameDecode: on any input the follower's decoder fails where
// proto.Unmarshal fails, and otherwise reads the same message (unknown
// fields dropped), never panicking.
func FuzzLeaderFrameDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		b, _ := proto.Marshal(randomLeaderMessage(r))
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x02, 0x4a, 0x05})       // records longer than the message
	f.Add([]byte{0x0a, 0x03, 0x0a, 0x01, 0xff}) // a topic that is not UTF-8
	f.Add([]byte{0x0a, 0x02, 0x10, 0x05})       // partition as a wrong wire type
	f.Add([]byte{0x0a, 0x02, 0x12, 0x00})       // partition with a wrong wire type
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &replpb.LeaderMessage{}
		wantErr := proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, want)
		var fr leaderFrame
		err := fr.decode(mem.BufferSlice{mem.SliceBuffer(b)})
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("decode error %v, proto.Unmarshal error %v", err, wantErr)
		}
		if err == nil && !proto.Equal(&fr.msg, want) {
			t.Fatalf("decoded %v, proto.Unmarshal %v", &fr.msg, want)
		}
		fr.release()
	})
}
