package broker

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// flatten reads a raw body into memory, file ranges included.
func flatten(t *testing.T, body *rawBody) []byte {
	t.Helper()
	var out []byte
	for _, p := range body.pieces {
		if p.file == nil {
			out = append(out, p.buf...)
			continue
		}
		b := make([]byte, p.size)
		if _, err := p.file.ReadAt(b, p.pos); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	if int64(len(out)) != body.size {
		t.Fatalf("body size %d, pieces hold %d", body.size, len(out))
	}
	return out
}

// TestFetchEncodeMatchesKmsg checks the hand-written Fetch layout against
// kmsg's encoder for every served version, with topic ids (v13+), and
// CurrentLeader and NodeEndpoints (v16+; Kafka sets them only there, but
// they are tagged fields of v12+, so the layout is checked from v12).
func TestFetchEncodeMatchesKmsg(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 300)
	f, err := os.Create(filepath.Join(t.TempDir(), "seg.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	rack := "rack-b"
	for v := int16(0); v <= 17; v++ {
		for _, readCommitted := range []bool{false, true} {
			res := &fetchResult{version: v, errorCode: 0, sessionID: 0}
			want := kmsg.NewPtrFetchResponse()
			want.Version = v
			add := func(topic string, parts ...fetchPartResult) {
				id := [16]byte{byte(len(topic)), 0xfe, 3: byte(len(res.topics))}
				res.topics = append(res.topics, fetchTopicResult{topic: topic, id: id, parts: parts})
				kt := kmsg.NewFetchResponseTopic()
				kt.Topic, kt.TopicID = topic, id
				for _, p := range parts {
					kp := kmsg.NewFetchResponseTopicPartition()
					kp.Partition, kp.ErrorCode = p.partition, p.errorCode
					kp.HighWatermark, kp.LastStableOffset, kp.LogStartOffset = p.highWatermark, p.lastStableOffset, p.logStartOffset
					if p.leaderSet {
						kp.CurrentLeader.LeaderID, kp.CurrentLeader.LeaderEpoch = p.leaderID, p.leaderEpoch
					}
					if p.emptyAborted {
						kp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
						for _, a := range p.aborted {
							ka := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
							ka.ProducerID, ka.FirstOffset = a.ProducerID, a.FirstOffset
							kp.AbortedTransactions = append(kp.AbortedTransactions, ka)
						}
					}
					kp.PreferredReadReplica = -1
					kp.RecordBatches = []byte{}
					for _, r := range p.ranges {
						if r.file != nil {
							kp.RecordBatches = append(kp.RecordBatches, data[r.pos:r.pos+r.size]...)
						} else {
							kp.RecordBatches = append(kp.RecordBatches, r.inline...)
						}
					}
					kt.Partitions = append(kt.Partitions, kp)
				}
				want.Topics = append(want.Topics, kt)
			}
			var p0, p1, p2, p3, p4 fetchPartResult
			p0 = fetchPartResult{partition: 0, highWatermark: 100, lastStableOffset: 90, logStartOffset: 3, emptyAborted: readCommitted}
			if readCommitted {
				p0.aborted = []segment.AbortedTxn{{ProducerID: 7, FirstOffset: 4, LastOffset: 9}, {ProducerID: 1 << 40, FirstOffset: 12, LastOffset: 30}}
			}
			p0.add(recordRange{file: f, pos: 16, size: 200})
			p0.add(recordRange{file: f, pos: 1000, size: 3000}) // 3200 bytes: a two-byte uvarint length
			p1 = fetchPartResult{partition: 7, errorCode: 1, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1, emptyAborted: readCommitted}
			p2 = fetchPartResult{partition: 2, highWatermark: 5, lastStableOffset: 5, logStartOffset: 0, emptyAborted: readCommitted}
			p2.add(recordRange{inline: []byte("inline")})
			add("topic-a", p0, p1)
			add("b", p2)
			add("empty")
			if v >= 12 {
				// NOT_LEADER_OR_FOLLOWER with a leader (epoch 1<<20: a
				// multi-byte int32), FENCED_LEADER_EPOCH with none
				// known (-1, -1: not sent).
				p3 = fetchPartResult{partition: 4, errorCode: 6, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1, emptyAborted: readCommitted,
					leaderSet: true, leaderID: 2, leaderEpoch: 1 << 20}
				p4 = fetchPartResult{partition: 5, errorCode: 74, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1, emptyAborted: readCommitted,
					leaderSet: true, leaderID: -1, leaderEpoch: -1}
				add("moved", p3, p4)
				if readCommitted { // with and without NodeEndpoints
					res.nodeEndpoints = []kmsg.FetchResponseBroker{{NodeID: 2, Host: "broker-2.example", Port: 19092, Rack: &rack}, {NodeID: 3, Host: "h3", Port: 9092}}
					want.Brokers = res.nodeEndpoints
				}
			}

			got := flatten(t, encodeFetch(res))
			if w := want.AppendTo(nil); !bytes.Equal(got, w) {
				t.Fatalf("v%d read_committed=%v: encodings differ\ngot  %x\nwant %x", v, readCommitted, got[:min(len(got), 120)], w[:min(len(w), 120)])
			}
			dec := kmsg.NewPtrFetchResponse()
			dec.Version = v
			if err := dec.ReadFrom(got); err != nil {
				t.Fatalf("v%d: kmsg cannot read our encoding: %v", v, err)
			}
		}
	}
}

func TestEncodeResponseHeader(t *testing.T) {
	for _, tc := range []struct {
		resp    kmsg.Response
		tagByte bool
	}{
		{&kmsg.MetadataResponse{Version: 8}, false},
		{&kmsg.MetadataResponse{Version: 9}, true},
		{&kmsg.ApiVersionsResponse{Version: 3}, false}, // always header v0
		{&kmsg.DescribeClusterResponse{Version: 0}, true},
	} {
		frame := encodeResponse(nil, 77, tc.resp)
		body := tc.resp.AppendTo(nil)
		wantLen := 4 + len(body)
		if tc.tagByte {
			wantLen++
		}
		if len(frame)-4 != wantLen {
			t.Fatalf("%T v%d: frame of %d bytes, want %d", tc.resp, tc.resp.GetVersion(), len(frame)-4, wantLen)
		}
		if got := int(frame[0])<<24 | int(frame[1])<<16 | int(frame[2])<<8 | int(frame[3]); got != wantLen {
			t.Fatalf("%T: size field %d, want %d", tc.resp, got, wantLen)
		}
		if frame[7] != 77 {
			t.Fatalf("%T: correlation id %x", tc.resp, frame[4:8])
		}
	}
}
