package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/group"
)

// txnOffsetFetch is OffsetFetch v7 of one partition, with require_stable
// as given.
func txnOffsetFetch(t *testing.T, s *Server, groupID, topic string, partition int32, stable bool) (int64, int16) {
	t.Helper()
	cl := newClient(t, s)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = groupID
	req.RequireStable = stable
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{partition}}}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("offset fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// TestTxnOffsetCommitThroughServer sends TxnOffsetCommit over the wire:
// the offsets are written to the group's partition of __consumer_offsets
// as a transactional batch the partition's producer state records, stay
// unstable until the marker hook runs, and then are committed.
func TestTxnOffsetCommitThroughServer(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "in", 2, nil)

	const pid, epoch = 4242, 3
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "etl", "g", pid, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "in"
	for p := range int32(2) {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, 10+int64(p)
		rt.Partitions = append(rt.Partitions, rp)
	}
	unknown := kmsg.NewTxnOffsetCommitRequestTopic()
	unknown.Topic = "missing"
	unknown.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{kmsg.NewTxnOffsetCommitRequestTopicPartition()}
	req.Topics = append(req.Topics, rt, unknown)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			want := int16(0)
			if rt.Topic == "missing" {
				want = kerr.UnknownTopicOrPartition.Code
			}
			if rp.ErrorCode != want {
				t.Errorf("%s/%d: got %v, want %v", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode), kerr.ErrorForCode(want))
			}
		}
	}

	part := int32(s.groups.PartitionFor("g"))
	lp := s.topic(group.Topic).local(part)
	if e, _, ok := lp.producers.Producer(pid); !ok || e != epoch {
		t.Errorf("producer state of %s/%d: got epoch %d, known %v; want epoch %d", group.Topic, part, e, ok, epoch)
	}

	if off, code := txnOffsetFetch(t, s, "g", "in", 1, false); off != -1 || code != 0 {
		t.Errorf("before the marker: got %d %v, want -1 and no error", off, kerr.ErrorForCode(code))
	}
	if _, code := txnOffsetFetch(t, s, "g", "in", 1, true); code != kerr.UnstableOffsetCommit.Code {
		t.Errorf("before the marker, require_stable: got %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(code))
	}
	s.groupTxnMarker(part, pid, true)
	for p := range int32(2) {
		if off, code := txnOffsetFetch(t, s, "g", "in", p, true); off != 10+int64(p) || code != 0 {
			t.Errorf("partition %d after the marker: got %d %v, want %d", p, off, kerr.ErrorForCode(code), 10+p)
		}
	}
}
