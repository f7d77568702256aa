package strataapi

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func sampleShareRequest() *DescribeSharePartitionsRequest {
	return &DescribeSharePartitionsRequest{GroupID: "workers", Topics: []DescribeSharePartitionsRequestTopic{
		{Topic: "jobs", Partitions: []int32{0, 2}}, {Topic: "all-of-it", Partitions: []int32{}},
	}}
}

func sampleShareResponse() *DescribeSharePartitionsResponse {
	return &DescribeSharePartitionsResponse{Topics: []DescribeSharePartitionsResponseTopic{
		{Topic: "jobs", Partitions: []DescribeSharePartition{
			{Partition: 0, Loaded: true, StartOffset: 10, EndOffset: 25, Available: 3, Acquired: 7, Acknowledged: 4, Archiving: 1, Archived: 0,
				AcquiredTotal: 40, RedeliveredTotal: 5, ArchivedTotal: 2},
			NewDescribeSharePartition(1, 0),
			NewDescribeSharePartition(2, 6 /* NOT_LEADER_OR_FOLLOWER */),
		}},
		{Topic: "secret", ErrorCode: 29 /* TOPIC_AUTHORIZATION_FAILED */, Partitions: []DescribeSharePartition{}},
	}}
}

func TestDescribeSharePartitionsRoundTrip(t *testing.T) {
	for i, req := range []*DescribeSharePartitionsRequest{sampleShareRequest(), {GroupID: "g"}} {
		var got DescribeSharePartitionsRequest
		if err := got.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatalf("#%d: request: %v", i, err)
		}
		if !reflect.DeepEqual(&got, req) {
			t.Errorf("#%d: request got %+v, want %+v", i, got, req)
		}
	}
	resp := sampleShareResponse()
	var got DescribeSharePartitionsResponse
	if err := got.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, resp) {
		t.Errorf("response got %+v, want %+v", got, resp)
	}
	if Name(KeyDescribeSharePartitions) != "DescribeSharePartitions" {
		t.Errorf("Name(%d) = %q", KeyDescribeSharePartitions, Name(KeyDescribeSharePartitions))
	}
}

// TestDescribeSharePartitionsRefuses: truncated bodies, trailing bytes,
// unknown versions and lengths larger than the body are ErrMalformed.
func TestDescribeSharePartitionsRefuses(t *testing.T) {
	body := sampleShareRequest().AppendTo(nil)
	cases := [][]byte{
		body[:len(body)-1],
		append(append([]byte{}, body...), 0),
		{2, 'g', 0xff, 0xff, 0xff, 0x07},                                    // 2^28 topics in 6 bytes
		{2, 'g', 2, 5, 'j', 'o', 'b', 's', 0xff, 0xff, 0x03, 0, 0, 0, 0, 0}, // 65534 partitions
	}
	for i, b := range cases {
		var r DescribeSharePartitionsRequest
		if err := r.ReadFrom(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("#%d: got %v, want ErrMalformed", i, err)
		}
	}
	r := DescribeSharePartitionsRequest{Version: 1}
	if err := r.ReadFrom(body); !errors.Is(err, ErrMalformed) {
		t.Errorf("version 1: got %v, want ErrMalformed", err)
	}
	rb := sampleShareResponse().AppendTo(nil)
	for i, cut := range [][]byte{rb[:len(rb)-3], rb[:20], append(append([]byte{}, rb...), 0)} {
		var resp DescribeSharePartitionsResponse
		if err := resp.ReadFrom(cut); !errors.Is(err, ErrMalformed) {
			t.Errorf("response #%d: got %v, want ErrMalformed", i, err)
		}
	}
}

// FuzzDescribeSharePartitionsRequest: decoding never panics, allocates
// at most a bounded multiple of the input, and what decodes re-encodes to
// bytes that decode to the same request.
func FuzzDescribeSharePartitionsRequest(f *testing.F) {
	f.Add(sampleShareRequest().AppendTo(nil))
	f.Add((&DescribeSharePartitionsRequest{}).AppendTo(nil))
	f.Add([]byte{2, 'g', 0xff, 0xff, 0xff, 0x07})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r DescribeSharePartitionsRequest
		if err := r.ReadFrom(b); err != nil {
			return
		}
		n := 0
		for _, tp := range r.Topics {
			n += 1 + len(tp.Partitions)
		}
		if n > len(b) {
			t.Fatalf("%d elements from %d bytes", n, len(b))
		}
		again := r.AppendTo(nil)
		var r2 DescribeSharePartitionsRequest
		if err := r2.ReadFrom(again); err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-encoded %x does not decode the same: %v", again, err)
		}
		if !bytes.Equal(again, r2.AppendTo(nil)) {
			t.Fatalf("encoding not stable")
		}
	})
}

// FuzzDescribeSharePartitionsResponse: the client's decoder never panics
// on what a broker sends, and what decodes re-encodes to the same
// message.
func FuzzDescribeSharePartitionsResponse(f *testing.F) {
	f.Add(sampleShareResponse().AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r DescribeSharePartitionsResponse
		if err := r.ReadFrom(b); err != nil {
			return
		}
		var r2 DescribeSharePartitionsResponse
		if err := r2.ReadFrom(r.AppendTo(nil)); err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-encoded does not decode the same: %v", err)
		}
	})
}
