package strataapi

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func sampleRequest() *DescribeTieredStorageRequest {
	return &DescribeTieredStorageRequest{Topics: []DescribeTieredStorageRequestTopic{
		{Topic: "orders", Partitions: []int32{0, 2}}, {Topic: "all-of-it", Partitions: []int32{}},
	}}
}

func sampleResponse() *DescribeTieredStorageResponse {
	p := NewDescribeTieredStoragePartition(1, 6 /* NOT_LEADER_OR_FOLLOWER */)
	return &DescribeTieredStorageResponse{ErrorCode: 0, CacheHits: 7, CacheJoins: 1, CacheMisses: 3, CacheEvictions: 0, CacheBytes: 1 << 20,
		Topics: []DescribeTieredStorageResponseTopic{
			{Topic: "orders", Partitions: []DescribeTieredStoragePartition{{Partition: 0, ManifestEpoch: 3, RemoteLogStart: 0, RemoteLogEnd: 500,
				RemoteBytes: 40960, RemoteSegments: 10, LastUploadMs: 1700000000000, LocalSegments: 2, PendingSegments: 1, PendingBytes: 4096,
				OldestPendingMs: 1500, CacheHits: 5, CacheJoins: 0, CacheMisses: 2}, p}},
			{Topic: "nosuch", ErrorCode: 3, Partitions: []DescribeTieredStoragePartition{}},
		}}
}

func TestDescribeTieredStorageRoundTrip(t *testing.T) {
	for i, req := range []*DescribeTieredStorageRequest{sampleRequest(), {}} {
		var got DescribeTieredStorageRequest
		if err := got.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatalf("#%d: request: %v", i, err)
		}
		if !reflect.DeepEqual(&got, req) {
			t.Errorf("#%d: request got %+v, want %+v", i, got, req)
		}
	}
	resp := sampleResponse()
	var got DescribeTieredStorageResponse
	if err := got.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, resp) {
		t.Errorf("response got %+v, want %+v", got, resp)
	}
}

// TestDescribeTieredStorageRefuses: truncated bodies, trailing bytes,
// unknown versions and lengths larger than the body are ErrMalformed.
func TestDescribeTieredStorageRefuses(t *testing.T) {
	body := sampleRequest().AppendTo(nil)
	cases := [][]byte{
		body[:len(body)-1],
		append(append([]byte{}, body...), 0),
		{0xff, 0xff, 0xff, 0x07},                                     // 2^28 topics in 4 bytes
		{3, 7, 'o', 'r', 'd', 'e', 'r', 's', 0xff, 0xff, 0x03, 0, 0}, // 65534 partitions
	}
	for i, b := range cases {
		var r DescribeTieredStorageRequest
		if err := r.ReadFrom(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("#%d: got %v, want ErrMalformed", i, err)
		}
	}
	r := DescribeTieredStorageRequest{Version: 1}
	if err := r.ReadFrom(body); !errors.Is(err, ErrMalformed) {
		t.Errorf("version 1: got %v, want ErrMalformed", err)
	}
	rb := sampleResponse().AppendTo(nil)
	var resp DescribeTieredStorageResponse
	if err := resp.ReadFrom(rb[:len(rb)-3]); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated response: got %v, want ErrMalformed", err)
	}
}

// FuzzDescribeTieredStorageRequest: decoding never panics, allocates at
// most a bounded multiple of the input, and what decodes re-encodes to
// bytes that decode to the same request.
func FuzzDescribeTieredStorageRequest(f *testing.F) {
	f.Add(sampleRequest().AppendTo(nil))
	f.Add((&DescribeTieredStorageRequest{}).AppendTo(nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0x07})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r DescribeTieredStorageRequest
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
		var r2 DescribeTieredStorageRequest
		if err := r2.ReadFrom(again); err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-encoded %x does not decode the same: %v", again, err)
		}
		if !bytes.Equal(again, r2.AppendTo(nil)) {
			t.Fatalf("encoding not stable")
		}
	})
}

// FuzzDescribeTieredStorageResponse: the client's decoder never panics on
// what a broker sends, and what decodes re-encodes to the same message.
func FuzzDescribeTieredStorageResponse(f *testing.F) {
	f.Add(sampleResponse().AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r DescribeTieredStorageResponse
		if err := r.ReadFrom(b); err != nil {
			return
		}
		var r2 DescribeTieredStorageResponse
		if err := r2.ReadFrom(r.AppendTo(nil)); err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-encoded does not decode the same: %v", err)
		}
	})
}
