package broker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/broker/txn"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/proto/replpb"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// txnProps are the settings of the transaction tests: few partitions of
// __transaction_state, so that it is created and loaded quickly.
var txnProps = map[string]string{"transaction.state.log.num.partitions": "3"}

// txnClient is a client whose AddPartitionsToTxn and InitProducerId
// versions are at most apv and ipv.
func txnClient(t *testing.T, s *Server, apv, ipv int16) *kgo.Client {
	t.Helper()
	v := kversion.Stable()
	v.SetMaxKeyVersion(24, apv)
	v.SetMaxKeyVersion(22, ipv)
	return newClient(t, s, kgo.MaxVersions(v))
}

func txnRequest[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.Request(testCtx(t), req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(R)
}

// initTxn finds the coordinator of id (creating __transaction_state) and
// retries InitProducerId until the coordinator has loaded.
func initTxn(t *testing.T, cl *kgo.Client, id string, timeoutMs int32) (int64, int16) {
	t.Helper()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKey, fc.CoordinatorKeys = 1, id, []string{id}
	var resp *kmsg.InitProducerIDResponse
	if !poll.For(30*time.Second, func() bool {
		f := txnRequest[*kmsg.FindCoordinatorResponse](t, cl, fc)
		if f.Coordinators[0].ErrorCode != 0 {
			return false
		}
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, timeoutMs
		resp = txnRequest[*kmsg.InitProducerIDResponse](t, cl, req)
		return resp.ErrorCode == 0
	}) {
		t.Fatalf("InitProducerId(%q): %v", id, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func addPartitionsV3(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16, topic string, parts ...int32) map[int32]int16 {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{rt}
	resp := txnRequest[*kmsg.AddPartitionsToTxnResponse](t, cl, req)
	out := map[int32]int16{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	return out
}

func describeTxn(t *testing.T, cl *kgo.Client, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	return txnRequest[*kmsg.DescribeTransactionsResponse](t, cl, req).TransactionStates[0]
}

// TestTxnCoordinatorSingleNode runs the coordinator's requests against
// one broker: FindCoordinator creates __transaction_state, InitProducerId,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and
// ListTransactions answer as Kafka.
func TestTxnCoordinatorSingleNode(t *testing.T) {
	s := startServer(t, txnProps)
	cl := txnClient(t, s, 3, 4)
	createTopic(t, cl, "tx-data", 2, nil)
	const id = "single-1"

	pid, epoch := initTxn(t, cl, id, 60000)
	if epoch != 0 {
		t.Fatalf("epoch %d, want 0", epoch)
	}
	if ts, ok := s.coord.Snapshot().Topic(txn.Topic); !ok || len(ts.Partitions) != 3 {
		t.Fatalf("%s not created with 3 partitions", txn.Topic)
	}
	// FindCoordinator v3 (single key) names this broker too.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKey = 3, 1, id
	if r := txnRequest[*kmsg.FindCoordinatorResponse](t, cl, fc); r.ErrorCode != 0 || r.NodeID != s.cfg.BrokerID {
		t.Fatalf("FindCoordinator v3: %v node %d", kerr.ErrorForCode(r.ErrorCode), r.NodeID)
	}

	// The internal topic takes no client writes.
	if r := produceRaw(t, cl, txn.Topic, 0, buildBatch(t, segment.CodecNone, 1)); r.ErrorCode != kerr.InvalidTopicException.Code {
		t.Errorf("produce to %s: %v", txn.Topic, kerr.ErrorForCode(r.ErrorCode))
	}

	// Partitions: an unknown one fails the request, the others are not attempted.
	got := addPartitionsV3(t, cl, id, pid, epoch, "tx-data", 0, 7)
	if got[0] != kerr.OperationNotAttempted.Code || got[7] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("add with an unknown partition: %v", got)
	}
	// An internal topic only through AddOffsetsToTxn, as Kafka.
	if got := addPartitionsV3(t, cl, id, pid, epoch, group.Topic, 0); got[0] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("add %s-0: %v, want TOPIC_AUTHORIZATION_FAILED", group.Topic, kerr.ErrorForCode(got[0]))
	}
	if got := addPartitionsV3(t, cl, id, pid, epoch, "tx-data", 0, 1); got[0] != 0 || got[1] != 0 {
		t.Fatalf("add: %v", got)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = id, pid, epoch, "tx-group"
	if r := txnRequest[*kmsg.AddOffsetsToTxnResponse](t, cl, ao); r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	d := describeTxn(t, cl, id)
	wantParts := fmt.Sprintf("[{%s [%d]} {tx-data [0 1]}]", group.Topic, s.groups.PartitionFor("tx-group"))
	var gotParts []string
	for _, tp := range d.Topics {
		gotParts = append(gotParts, fmt.Sprintf("{%s %v}", tp.Topic, tp.Partitions))
	}
	if d.ErrorCode != 0 || d.State != "Ongoing" || d.ProducerID != pid || d.TimeoutMillis != 60000 || fmt.Sprint(gotParts) != wantParts {
		t.Fatalf("describe: %+v (partitions %v, want %s)", d, gotParts, wantParts)
	}
	if d := describeTxn(t, cl, "never-seen"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Errorf("describe unknown: %v", kerr.ErrorForCode(d.ErrorCode))
	}

	lt := kmsg.NewPtrListTransactionsRequest()
	lt.StateFilters = []string{"Ongoing", "Bogus"}
	lt.DurationFilterMillis = -1
	lr := txnRequest[*kmsg.ListTransactionsResponse](t, cl, lt)
	if lr.ErrorCode != 0 || len(lr.TransactionStates) != 1 || lr.TransactionStates[0].TransactionalID != id ||
		fmt.Sprint(lr.UnknownStateFilters) != "[Bogus]" {
		t.Fatalf("list: %+v", lr)
	}

	// Fencing: a second InitProducerId aborts the ongoing transaction
	// (CONCURRENT_TRANSACTIONS until it is done) and bumps the epoch.
	req := kmsg.NewPtrInitProducerIDRequest()
	txnID := id
	req.TransactionalID, req.TransactionTimeoutMillis = &txnID, 60000
	if r := txnRequest[*kmsg.InitProducerIDResponse](t, cl, req); r.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("init over an ongoing transaction: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = id, pid, epoch, true
	if r := txnRequest[*kmsg.EndTxnResponse](t, cl, et); r.ErrorCode != kerr.ProducerFenced.Code {
		t.Errorf("EndTxn v%d of the fenced producer: %v, want PRODUCER_FENCED", r.Version, kerr.ErrorForCode(r.ErrorCode))
	}
	et.Version = 1
	if r := txnRequest[*kmsg.EndTxnResponse](t, newClient(t, s, kgo.MaxVersions(maxKey(26, 1))), et); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Errorf("EndTxn v1 of the fenced producer: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(r.ErrorCode))
	}

	req.TransactionTimeoutMillis = int32((16 * time.Minute).Milliseconds())
	if r := txnRequest[*kmsg.InitProducerIDResponse](t, cl, req); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Errorf("timeout above transaction.max.timeout.ms: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func maxKey(key, v int16) *kversion.Versions {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(key, v)
	return vs
}

// TestTxnVerifyInProcess: KIP-890 verification on the coordinator's
// broker, through verifyTxnPartition and through AddPartitionsToTxn v4
// VerifyOnly.
func TestTxnVerifyInProcess(t *testing.T) {
	s := startServer(t, txnProps)
	cl := newClient(t, s)
	createTopic(t, cl, "tx-verify", 2, nil)
	const id = "verify-1"
	pid, epoch := initTxn(t, cl, id, 60000)
	ctx := testCtx(t)

	var ke *kerr.Error
	if err := s.verifyTxnPartition(ctx, txnCheck{abortable: false}, id, pid, epoch, "tx-verify", 0); !errors.As(err, &ke) || ke != kerr.InvalidTxnState {
		t.Fatalf("before AddPartitionsToTxn: %v, want INVALID_TXN_STATE", err)
	}
	if err := s.verifyTxnPartition(ctx, txnCheck{abortable: true}, id, pid, epoch, "tx-verify", 0); !errors.As(err, &ke) || ke != kerr.TransactionAbortable {
		t.Fatalf("before AddPartitionsToTxn, for a version that handles it: %v, want TRANSACTION_ABORTABLE", err)
	}
	if got := addPartitionsV3(t, txnClient(t, s, 3, 4), id, pid, epoch, "tx-verify", 0); got[0] != 0 {
		t.Fatalf("add: %v", got)
	}
	if err := s.verifyTxnPartition(ctx, txnCheck{abortable: false}, id, pid, epoch, "tx-verify", 0); err != nil {
		t.Fatalf("added partition: %v", err)
	}
	for i, tt := range []struct {
		pid   int64
		epoch int16
		part  int32
		want  *kerr.Error
	}{
		{pid, epoch, 1, kerr.InvalidTxnState},
		{pid, epoch + 1, 0, kerr.InvalidProducerEpoch}, // the coordinator's PRODUCER_FENCED
		{pid + 1, epoch, 0, kerr.InvalidProducerIDMapping},
	} {
		err := s.verifyTxnPartition(ctx, txnCheck{abortable: false}, id, tt.pid, tt.epoch, "tx-verify", tt.part)
		if !errors.As(err, &ke) || ke != tt.want {
			t.Errorf("#%d: %v, want %v", i, err, tt.want)
		}
	}

	// The batched form: VerifyOnly adds nothing.
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = id, pid, epoch, true
	rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	rt.Topic, rt.Partitions = "tx-verify", []int32{0, 1}
	tr.Topics = append(tr.Topics, rt)
	req.Transactions = append(req.Transactions, tr)
	resp := txnRequest[*kmsg.AddPartitionsToTxnResponse](t, cl, req)
	if resp.Version < 4 || len(resp.Transactions) != 1 {
		t.Fatalf("v%d response %+v", resp.Version, resp)
	}
	codes := map[int32]int16{}
	for _, p := range resp.Transactions[0].Topics[0].Partitions {
		codes[p.Partition] = p.ErrorCode
	}
	if codes[0] != 0 || codes[1] != kerr.TransactionAbortable.Code {
		t.Errorf("verify-only: %v", codes)
	}
	if d := describeTxn(t, cl, id); len(d.Topics) != 1 || len(d.Topics[0].Partitions) != 1 {
		t.Errorf("verify-only added partitions: %+v", d.Topics)
	}
}

// TestTxnVerifyRemote: a partition leader that does not coordinate the
// transactional id verifies over the Transactions gRPC service; a call
// under an id no registered broker has is refused.
func TestTxnVerifyRemote(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-txn-verify")
	var brokers []*Server
	for i := range 3 {
		props := map[string]string{"broker.id": fmt.Sprint(i + 1), "zookeeper.connect": connect,
			"transaction.state.log.num.partitions": "3", "transaction.state.log.replication.factor": "3"}
		brokers = append(brokers, startServer(t, props))
	}
	waitFor(t, "every broker registered", func() bool { return len(brokers[0].coord.Snapshot().Brokers) == 3 })
	cl := newClient(t, brokers[0])
	createTopic(t, cl, "tx-remote", 2, nil)
	const id = "remote-1"
	pid, epoch := initTxn(t, cl, id, 60000)
	coordB, err := brokers[0].txnCoordinator(id, false)
	if err != nil {
		t.Fatal(err)
	}
	var other *Server
	for _, b := range brokers {
		if b.cfg.BrokerID != coordB.ID {
			other = b
			break
		}
	}
	t.Logf("coordinator broker %d; verifying from broker %d", coordB.ID, other.cfg.BrokerID)
	ctx := testCtx(t)
	var ke *kerr.Error
	if err := other.verifyTxnPartition(ctx, txnCheck{abortable: false}, id, pid, epoch, "tx-remote", 0); !errors.As(err, &ke) || ke != kerr.InvalidTxnState {
		t.Fatalf("remote, not added: %v, want INVALID_TXN_STATE", err)
	}
	if err := other.verifyTxnPartition(ctx, txnCheck{abortable: true}, id, pid, epoch, "tx-remote", 0); !errors.As(err, &ke) || ke != kerr.TransactionAbortable {
		t.Fatalf("remote, not added, for a version that handles it: %v, want TRANSACTION_ABORTABLE", err)
	}
	if got := addPartitionsV3(t, txnClient(t, brokers[0], 3, 4), id, pid, epoch, "tx-remote", 0); got[0] != 0 {
		t.Fatalf("add: %v", got)
	}
	if err := other.verifyTxnPartition(ctx, txnCheck{abortable: false}, id, pid, epoch, "tx-remote", 0); err != nil {
		t.Fatalf("remote, added: %v", err)
	}
	if err := other.verifyTxnPartition(ctx, txnCheck{abortable: false}, id, pid, epoch+1, "tx-remote", 0); !errors.As(err, &ke) || ke != kerr.InvalidProducerEpoch {
		t.Fatalf("remote, fenced: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	// Transaction version 2: the leader adds the partition
	// (AddPartitionsToTxn v5 without VerifyOnly); it verifies after.
	if err := other.verifyTxnPartition(ctx, txnCheck{abortable: true, add: true}, id, pid, epoch, "tx-remote", 1); err != nil {
		t.Fatalf("remote add: %v", err)
	}
	if err := other.verifyTxnPartition(ctx, txnCheck{abortable: true}, id, pid, epoch, "tx-remote", 1); err != nil {
		t.Fatalf("remote, added by the leader: %v", err)
	}
	if err := other.verifyTxnPartition(ctx, txnCheck{abortable: true, add: true}, id, pid, epoch+1, "tx-remote", 1); !errors.As(err, &ke) || ke != kerr.InvalidProducerEpoch {
		t.Fatalf("remote add, fenced: %v, want INVALID_PRODUCER_EPOCH", err)
	}

	// A caller claiming an unregistered broker id is refused.
	c, err := other.txnPeers.client(other, coordB.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.VerifyTxnPartitions(ctx, &replpb.KafkaMessage{BrokerId: 99, Version: 4})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("call as broker 99: %v, want PermissionDenied", err)
	}
}
