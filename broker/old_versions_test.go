package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOldAdminVersions drives the oldest versions of the admin APIs that
// Kafka 3.9 still serves (CreateTopics v0-1, DeleteTopics v0,
// OffsetForLeaderEpoch v0-1, ApiVersions v4) over a raw connection: each
// decodes, acts and answers in its version's form.
func TestOldAdminVersions(t *testing.T) {
	s := startServer(t, nil)
	rc := dialRaw(t, s)
	corr := int32(0)
	next := func() int32 { corr++; return corr }

	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 4
	av.ClientSoftwareName, av.ClientSoftwareVersion = "raw", "1.0"
	if r := rc.request(next(), av).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 || len(r.ApiKeys) == 0 {
		t.Fatalf("ApiVersions v4: got %s with %d keys", kerr.ErrorForCode(r.ErrorCode), len(r.ApiKeys))
	}

	for _, version := range []int16{0, 1} {
		name := []string{"old-v0", "old-v1"}[version]
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.Version = version
		ct.TimeoutMillis = 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 2, 1
		ct.Topics = append(ct.Topics, rt)
		r := rc.request(next(), ct).(*kmsg.CreateTopicsResponse)
		if len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
			t.Fatalf("CreateTopics v%d: got %+v", version, r.Topics)
		}
		// Again: TOPIC_ALREADY_EXISTS, with a message from v1.
		r = rc.request(next(), ct).(*kmsg.CreateTopicsResponse)
		if len(r.Topics) != 1 || r.Topics[0].ErrorCode != kerr.TopicAlreadyExists.Code {
			t.Fatalf("CreateTopics v%d twice: got %+v", version, r.Topics)
		}
		if version == 1 && r.Topics[0].ErrorMessage == nil {
			t.Errorf("CreateTopics v1 twice: no error message")
		}
	}
	// v1's ValidateOnly creates nothing.
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version, ct.TimeoutMillis, ct.ValidateOnly = 1, 10000, true
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "old-validate", 1, 1
	ct.Topics = append(ct.Topics, rt)
	if r := rc.request(next(), ct).(*kmsg.CreateTopicsResponse); len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics v1 validate only: got %+v", r.Topics)
	}
	if s.topic("old-validate") != nil {
		t.Fatal("CreateTopics v1 validate only created the topic")
	}

	for _, version := range []int16{0, 1} {
		oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
		oe.Version = version
		ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
		ot.Topic = "old-v0"
		for _, p := range []int32{0, 7} {
			op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			op.Partition, op.LeaderEpoch = p, 0
			ot.Partitions = append(ot.Partitions, op)
		}
		oe.Topics = append(oe.Topics, ot)
		r := rc.request(next(), oe).(*kmsg.OffsetForLeaderEpochResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 2 {
			t.Fatalf("OffsetForLeaderEpoch v%d: got %+v", version, r.Topics)
		}
		p0, p7 := r.Topics[0].Partitions[0], r.Topics[0].Partitions[1]
		if p0.ErrorCode != 0 || p0.EndOffset != 0 {
			t.Errorf("OffsetForLeaderEpoch v%d partition 0: got %s end offset %d, want NONE 0", version, kerr.ErrorForCode(p0.ErrorCode), p0.EndOffset)
		}
		if version == 1 && p0.LeaderEpoch != 0 {
			t.Errorf("OffsetForLeaderEpoch v1 partition 0: leader epoch %d, want 0", p0.LeaderEpoch)
		}
		if p7.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("OffsetForLeaderEpoch v%d partition 7: got %s, want UNKNOWN_TOPIC_OR_PARTITION", version, kerr.ErrorForCode(p7.ErrorCode))
		}
	}

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version, dt.TimeoutMillis = 0, 10000
	dt.TopicNames = []string{"old-v0", "old-missing"}
	r := rc.request(next(), dt).(*kmsg.DeleteTopicsResponse)
	if len(r.Topics) != 2 {
		t.Fatalf("DeleteTopics v0: got %+v", r.Topics)
	}
	got := map[string]int16{}
	for _, rt := range r.Topics {
		got[*rt.Topic] = rt.ErrorCode
	}
	if got["old-v0"] != 0 || got["old-missing"] != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("DeleteTopics v0: got %v, want old-v0 NONE, old-missing UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	if s.topic("old-v0") != nil {
		t.Error("DeleteTopics v0 left the topic")
	}
}

// TestOffsetCommitFetchV0: a v0 OffsetCommit (no generation, no member:
// a simple commit) is answered in v0 form and its offset is what
// OffsetFetch v0 and v1 return; an unknown partition is
// UNKNOWN_TOPIC_OR_PARTITION as in later versions.
func TestOffsetCommitFetchV0(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "v0-offsets", 2, nil)
	rc := dialRaw(t, s)

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group = 0, "old-group"
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "v0-offsets"
	for _, p := range []struct {
		partition int32
		offset    int64
	}{{0, 42}, {9, 7}} {
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Partition, op.Offset, op.Metadata = p.partition, p.offset, kmsg.StringPtr("m")
		ot.Partitions = append(ot.Partitions, op)
	}
	oc.Topics = append(oc.Topics, ot)
	r := rc.request(1, oc).(*kmsg.OffsetCommitResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 2 {
		t.Fatalf("OffsetCommit v0: got %+v", r.Topics)
	}
	if p0, p9 := r.Topics[0].Partitions[0], r.Topics[0].Partitions[1]; p0.ErrorCode != 0 || p9.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("OffsetCommit v0: partition 0 %s, partition 9 %s; want NONE, UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(p0.ErrorCode), kerr.ErrorForCode(p9.ErrorCode))
	}

	for _, version := range []int16{0, 1} {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Version, of.Group = version, "old-group"
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = "v0-offsets", []int32{0, 1}
		of.Topics = append(of.Topics, ft)
		f := rc.request(int32(2+version), of).(*kmsg.OffsetFetchResponse)
		if len(f.Topics) != 1 || len(f.Topics[0].Partitions) != 2 {
			t.Fatalf("OffsetFetch v%d: got %+v", version, f.Topics)
		}
		p0, p1 := f.Topics[0].Partitions[0], f.Topics[0].Partitions[1]
		if p0.ErrorCode != 0 || p0.Offset != 42 || p0.Metadata == nil || *p0.Metadata != "m" {
			t.Errorf("OffsetFetch v%d partition 0: got %s offset %d metadata %v, want NONE 42 \"m\"", version, kerr.ErrorForCode(p0.ErrorCode), p0.Offset, p0.Metadata)
		}
		if p1.ErrorCode != 0 || p1.Offset != -1 {
			t.Errorf("OffsetFetch v%d partition 1: got %s offset %d, want NONE -1", version, kerr.ErrorForCode(p1.ErrorCode), p1.Offset)
		}
	}
}
