package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnAbortableByVersion sends, over a raw connection, the requests
// whose KIP-890 versions add TRANSACTION_ABORTABLE, at the last version
// without it and the first with it: a transactional Produce to a
// partition the transaction never added (v10: INVALID_TXN_STATE, v11:
// TRANSACTION_ABORTABLE) and a TxnOffsetCommit of a producer that never
// called AddOffsetsToTxn (v3: INVALID_TXN_STATE, v4:
// TRANSACTION_ABORTABLE), as Kafka 3.9's AddPartitionsToTxnManager maps
// its coordinator's answer. Nothing is appended. InitProducerId v5 and
// FindCoordinator v5 answer as v4 (Kafka 3.9 never answers them
// TRANSACTION_ABORTABLE).
func TestTxnAbortableByVersion(t *testing.T) {
	s := startServer(t, txnProps)
	cl := newClient(t, s)
	createTopic(t, cl, "ab", 1, nil)
	const id = "abortable-1"
	pid, epoch := initTxn(t, cl, id, 60000)
	rc := dialRaw(t, s)
	corr := int32(0)
	next := func() int32 { corr++; return corr }

	for i, tt := range []struct {
		version int16
		want    *kerr.Error
	}{
		{9, kerr.InvalidTxnState},
		{10, kerr.InvalidTxnState},
		{11, kerr.TransactionAbortable},
	} {
		req := produceRequest("ab", 0, txnBatch(t, pid, epoch, 0, 2, "x"))
		req.Version, req.TransactionID = tt.version, kmsg.StringPtr(id)
		sp := rc.request(next(), req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != tt.want.Code {
			t.Errorf("#%d: Produce v%d of a partition not in the transaction: got %v, want %v", i, tt.version, kerr.ErrorForCode(sp.ErrorCode), tt.want)
		}
		if sp.BaseOffset != -1 {
			t.Errorf("#%d: Produce v%d: base offset %d, want -1", i, tt.version, sp.BaseOffset)
		}
	}
	if end := s.topic("ab").local(0).log.LogEndOffset(); end != 0 {
		t.Fatalf("log end %d after refused batches, want 0", end)
	}

	// TxnOffsetCommit of a producer whose transaction has no group.
	createTopic(t, cl, "ab-in", 1, nil)
	for i, tt := range []struct {
		version int16
		want    *kerr.Error
	}{
		{2, kerr.InvalidTxnState},
		{3, kerr.InvalidTxnState},
		{4, kerr.TransactionAbortable},
	} {
		code := retryTxn(t, "TxnOffsetCommit", func() int16 {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.Version = tt.version
			req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = id, "ab-group", pid, epoch, -1
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = "ab-in"
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = 0, 7
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return rc.request(next(), req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		})
		if code != tt.want.Code {
			t.Errorf("#%d: TxnOffsetCommit v%d without AddOffsetsToTxn: got %v, want %v", i, tt.version, kerr.ErrorForCode(code), tt.want)
		}
	}

	// InitProducerId v5: the same answers as v4, with and without a
	// transactional id (a bump of the transactional producer's epoch).
	for _, txnID := range []*string{nil, kmsg.StringPtr(id)} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 5, txnID, 60000
		r := rc.request(next(), req).(*kmsg.InitProducerIDResponse)
		if r.ErrorCode != 0 || r.ProducerID < 0 || r.ProducerEpoch < 0 {
			t.Errorf("InitProducerId v5 (transactional id %v): got %v, id %d epoch %d", txnID != nil, kerr.ErrorForCode(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
		}
		if txnID != nil && (r.ProducerID != pid || r.ProducerEpoch != epoch+1) {
			t.Errorf("InitProducerId v5 of %q: got id %d epoch %d, want %d %d", id, r.ProducerID, r.ProducerEpoch, pid, epoch+1)
		}
	}
	// The old epoch is now fenced: Produce v11 still answers the
	// coordinator's PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, as Kafka
	// does at every version.
	req := produceRequest("ab", 0, txnBatch(t, pid, epoch, 0, 1, "y"))
	req.Version, req.TransactionID = 11, kmsg.StringPtr(id)
	if sp := rc.request(next(), req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; sp.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Errorf("Produce v11 at a fenced epoch: got %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(sp.ErrorCode))
	}
}

// TestFindCoordinatorV5V6 asks for coordinators at FindCoordinator v5 and
// v6 over a raw connection: group and transaction keys are answered as at
// v4; the share key type (2) is INVALID_REQUEST before v6 and at v6 the
// share coordinator of the share partition the key names (this broker,
// once __share_group_state is created and loaded).
func TestFindCoordinatorV5V6(t *testing.T) {
	s := startServer(t, txnProps)
	rc := dialRaw(t, s)
	corr := int32(0)
	find := func(version int16, keyType int8, key string) kmsg.FindCoordinatorResponseCoordinator {
		t.Helper()
		var c kmsg.FindCoordinatorResponseCoordinator
		retryTxn(t, "FindCoordinator", func() int16 {
			corr++
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorType, req.CoordinatorKeys = version, keyType, []string{key}
			resp := rc.request(corr, req).(*kmsg.FindCoordinatorResponse)
			if len(resp.Coordinators) != 1 {
				t.Fatalf("FindCoordinator v%d: %d coordinators, want 1", version, len(resp.Coordinators))
			}
			c = resp.Coordinators[0]
			if c.ErrorCode == kerr.InvalidRequest.Code {
				return 0 // for good: do not retry it
			}
			return c.ErrorCode
		})
		return c
	}
	for _, v := range []int16{5, 6} {
		for _, kt := range []int8{coordinatorTypeGroup, coordinatorTypeTransaction} {
			c := find(v, kt, "k")
			if c.ErrorCode != 0 || c.NodeID != s.cfg.BrokerID || c.Key != "k" {
				t.Errorf("v%d key type %d: got %+v", v, kt, c)
			}
		}
	}
	if c := find(6, coordinatorTypeShare, "g:AAAAAAAAAAAAAAAAAAAAAA:0"); c.ErrorCode != 0 || c.NodeID != s.cfg.BrokerID {
		t.Errorf("share key at v6: got %+v", c)
	}
	for i, tt := range []struct {
		version int16
		want    *kerr.Error
	}{
		{4, kerr.InvalidRequest},
		{5, kerr.InvalidRequest},
		{6, kerr.InvalidRequest}, // not group:topicId:partition
	} {
		c := find(tt.version, coordinatorTypeShare, "share-group")
		if c.ErrorCode != tt.want.Code || c.NodeID != -1 || c.Port != -1 || c.Host != "" {
			t.Errorf("#%d: share key at v%d: got %v node %d %s:%d, want %v and no node", i, tt.version, kerr.ErrorForCode(c.ErrorCode), c.NodeID, c.Host, c.Port, tt.want)
		}
		if c.ErrorMessage == nil || !strings.Contains(*c.ErrorMessage, "share") {
			t.Errorf("#%d: share key at v%d: message %v", i, tt.version, c.ErrorMessage)
		}
	}
}
