package broker

import (
	"testing"

	"github.com/stratastream/strata/broker/strataapi"
)

// TestStrataAPIsNotAdvertised: Strata's own keys are served but never in
// ApiVersions (servedAPIs is what ApiVersions lists).
func TestStrataAPIsNotAdvertised(t *testing.T) {
	if strataAPIs[strataapi.KeyDescribeTieredStorage] == nil {
		t.Fatal("DescribeTieredStorage not registered")
	}
	for _, a := range servedAPIs() {
		if strataapi.Name(a.key) != "" {
			t.Errorf("ApiVersions lists Strata's own key %d", a.key)
		}
	}
}

// TestStrataAPIDecodeBound: a DescribeTieredStorage frame of many empty
// topics, or of one topic with many partitions, allocates within
// MaxDecodeAmplification of its size, whole or cut short.
func TestStrataAPIDecodeBound(t *testing.T) {
	many := &strataapi.DescribeTieredStorageRequest{Topics: make([]strataapi.DescribeTieredStorageRequestTopic, craftedFrameBytes/3)}
	for i := range many.Topics {
		many.Topics[i].Partitions = []int32{}
	}
	wide := &strataapi.DescribeTieredStorageRequest{Topics: []strataapi.DescribeTieredStorageRequestTopic{{Topic: "t", Partitions: make([]int32, craftedFrameBytes/4)}}}
	for _, req := range []*strataapi.DescribeTieredStorageRequest{many, wide} {
		frame := frameOf(req)
		r, err := parseRequest(frame)
		if err != nil {
			t.Fatalf("crafted frame does not parse: %v", err)
		}
		if got := r.kreq.(*strataapi.DescribeTieredStorageRequest); len(got.Topics) != len(req.Topics) {
			t.Fatalf("decoded %d topics, want %d", len(got.Topics), len(req.Topics))
		}
		for _, f := range [][]byte{frame, frame[:len(frame)-1]} {
			alloc := allocatedBy(2, func() { _, _ = parseRequest(f) })
			if ratio := alloc / float64(len(f)); ratio > MaxDecodeAmplification {
				t.Errorf("a %d-byte frame allocated %.0f bytes, %.1f times its size; the bound is %d", len(f), alloc, ratio, MaxDecodeAmplification)
			} else {
				t.Logf("%d-byte frame: %.1f times its size", len(f), ratio)
			}
		}
	}
}
