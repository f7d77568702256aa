package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/strataapi"
)

// TestStrataAPIsNotAdvertised: Strata's own keys are served but never in
// ApiVersions (servedAPIs is what ApiVersions lists).
func TestStrataAPIsNotAdvertised(t *testing.T) {
	for _, key := range []int16{strataapi.KeyDescribeTieredStorage, strataapi.KeyDescribeSharePartitions} {
		if strataAPIs[key] == nil {
			t.Fatalf("%s not registered", strataapi.Name(key))
		}
	}
	for _, a := range servedAPIs() {
		if strataapi.Name(a.key) != "" {
			t.Errorf("ApiVersions lists Strata's own key %d", a.key)
		}
	}
}

// TestStrataAPIDecodeBound: a DescribeTieredStorage frame of many empty
// topics, or of one topic with many partitions, and a
// DescribeSharePartitions frame of many empty topics, allocate within
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
		checkDecodeBound(t, frame)
	}
	share := &strataapi.DescribeSharePartitionsRequest{GroupID: "g", Topics: make([]strataapi.DescribeSharePartitionsRequestTopic, craftedFrameBytes/3)}
	for i := range share.Topics {
		share.Topics[i].Partitions = []int32{}
	}
	checkDecodeBound(t, frameOf(share))
}

// checkDecodeBound fails t if frame, whole or cut short, allocates more
// than MaxDecodeAmplification times its size as it is parsed.
func checkDecodeBound(t *testing.T, frame []byte) {
	t.Helper()
	for _, f := range [][]byte{frame, frame[:len(frame)-1]} {
		alloc := allocatedBy(2, func() { _, _ = parseRequest(f) })
		if ratio := alloc / float64(len(f)); ratio > MaxDecodeAmplification {
			t.Errorf("a %d-byte frame allocated %.0f bytes, %.1f times its size; the bound is %d", len(f), alloc, ratio, MaxDecodeAmplification)
		} else {
			t.Logf("%d-byte frame: %.1f times its size", len(f), ratio)
		}
	}
}

// TestDescribeTieredStorageAuthorization: with an authorizer, a principal
// without DESCRIBE on the cluster gets CLUSTER_AUTHORIZATION_FAILED and no
// topics; granted, the same request is answered, with
// UNKNOWN_TOPIC_OR_PARTITION per partition for a partition the topic does
// not have.
func TestDescribeTieredStorageAuthorization(t *testing.T) {
	s := startServer(t, map[string]string{"authorizer.class.name": acl.ClassAclAuthorizer, "super.users": "User:admin"})
	grantAll(t, s, []acl.Binding{binding(anonymous, acl.OpCreate, acl.ResourceCluster, acl.ClusterName)})
	createTopic(t, newClient(t, s), "tiered-authz", 1, map[string]string{"remote.storage.enable": "true"})
	rc := dialRaw(t, s)
	req := &strataapi.DescribeTieredStorageRequest{Topics: []strataapi.DescribeTieredStorageRequestTopic{{Topic: "tiered-authz", Partitions: []int32{0, 5}}}}
	resp := rc.request(1, req).(*strataapi.DescribeTieredStorageResponse)
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(resp.Topics) != 0 {
		t.Fatalf("without DESCRIBE on the cluster: %+v", resp)
	}
	grantAll(t, s, []acl.Binding{binding(anonymous, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName)})
	resp = rc.request(2, req).(*strataapi.DescribeTieredStorageResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("granted: %+v", resp)
	}
	p0, p5 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if p0.ErrorCode != 0 || p0.LocalSegments != 1 || p0.PendingSegments != 0 || p5.ErrorCode != kerr.UnknownTopicOrPartition.Code || p5.RemoteLogStart != -1 {
		t.Fatalf("partitions %+v", resp.Topics[0].Partitions)
	}
}
