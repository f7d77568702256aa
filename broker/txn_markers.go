package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stratastream/strata/broker/txn"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/proto/replpb"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// This file carries the transaction coordinator's inter-broker calls:
//   - txnMarkerWriter sends one transaction's markers to the leaders of
//     its partitions, grouped by leader: writeTxnMarkers in process for
//     the partitions this broker leads, the WriteTxnMarkers call of the
//     Transactions gRPC service (proto/replication.proto) for the others.
//     A partition missing from the metadata (deleted) is reported Gone; a
//     partition without a leader, or whose leader cannot be reached, is
//     left out of the result, so the coordinator retries it.
//   - txnService serves the Transactions service on the replication
//     listener: WriteTxnMarkers for coordinators on other brokers, and
//     VerifyTxnPartitions (AddPartitionsToTxn v4 VerifyOnly, KIP-890; v5
//     without VerifyOnly adds the partition, transaction version 2) for
//     partition leaders on other brokers. Only registered brokers may
//     call (replica.Manager.CheckBroker).
//   - txnPeers keeps one client connection per other broker.

// writeTxnMarkersVersion is the WriteTxnMarkers version the coordinator
// sends for transactions of version 0 and 1 (v1, flexible);
// writeTxnMarkersV2Version carries the transaction version, sent for
// transactions of version 2 only (so a broker of an older build, which
// does not serve it, takes markers until transaction.version 2 is
// finalized).
const (
	writeTxnMarkersVersion   = 1
	writeTxnMarkersV2Version = 2
)

// verifyTxnVersion is the AddPartitionsToTxn version of verification;
// addTxnPartitionVersion the version a partition leader adds a partition
// with under transaction version 2 (VerifyOnly false, as Kafka 4.x's
// AddPartitionsToTxnManager).
const (
	verifyTxnVersion       = 4
	addTxnPartitionVersion = 5
)

// txnCallTimeout bounds one inter-broker transaction call.
const txnCallTimeout = 10 * time.Second

// txnMarkerWriter is the server as the coordinator's MarkerWriter.
type txnMarkerWriter struct{ s *Server }

// WriteMarkers writes b's markers to the partitions' leaders, in parallel
// per leader.
func (w txnMarkerWriter) WriteMarkers(ctx context.Context, b txn.MarkerBatch) map[txn.TopicPartition]txn.MarkerResult {
	s := w.s
	snap := s.coord.Snapshot()
	out := make(map[txn.TopicPartition]txn.MarkerResult, len(b.Partitions))
	byLeader := map[int32][]txn.TopicPartition{}
	for _, tp := range b.Partitions {
		pi, ok := snap.Partition(coord.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		if !ok {
			out[tp] = txn.MarkerResult{Gone: true}
			continue
		}
		if pi.State.Leader == coord.NoLeader {
			continue // retried once it has a leader
		}
		byLeader[pi.State.Leader] = append(byLeader[pi.State.Leader], tp)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for leader, tps := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := txnMarkersRequest(b, tps)
			var resp *kmsg.WriteTxnMarkersResponse
			if leader == s.cfg.BrokerID {
				resp = s.writeTxnMarkers(ctx, req)
			} else {
				var err error
				if resp, err = s.txnPeers.writeTxnMarkers(ctx, s, leader, req); err != nil {
					s.log.Debug("txn: markers not delivered to the leader; retried", "leader", leader, "partitions", len(tps), "err", err)
					return
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range resp.Markers {
				if m.ProducerID != b.ProducerID {
					continue
				}
				for _, t := range m.Topics {
					for _, p := range t.Partitions {
						tp := txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}
						if _, asked := out[tp]; !asked {
							out[tp] = txn.MarkerResult{Code: p.ErrorCode}
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// txnMarkersRequest is the WriteTxnMarkers request of b's markers to tps.
func txnMarkersRequest(b txn.MarkerBatch, tps []txn.TopicPartition) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = writeTxnMarkersVersion
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = b.ProducerID, b.ProducerEpoch, b.Commit, b.CoordinatorEpoch
	if b.TransactionVersion >= 2 {
		req.Version, m.TransactionVersion = writeTxnMarkersV2Version, b.TransactionVersion
	}
	idx := map[string]int{}
	for _, tp := range tps {
		i, ok := idx[tp.Topic]
		if !ok {
			i = len(m.Topics)
			idx[tp.Topic] = i
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = tp.Topic
			m.Topics = append(m.Topics, t)
		}
		m.Topics[i].Partitions = append(m.Topics[i].Partitions, tp.Partition)
	}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
	return req
}

// txnPeers holds a client connection to each other broker's replication
// listener, dialed on first use and again when its address changes.
type txnPeers struct {
	mu struct {
		sync.Mutex
		conns  map[int32]*grpc.ClientConn
		addrs  map[int32]string
		closed bool
	}
}

// client returns the Transactions client of broker id.
func (tp *txnPeers) client(s *Server, id int32) (replpb.TransactionsClient, error) {
	b, ok := s.coord.Snapshot().Broker(id)
	if !ok {
		return nil, fmt.Errorf("broker %d is not registered", id)
	}
	addr := fmt.Sprintf("%s:%d", b.Host, b.ReplicationPort)
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.mu.closed {
		return nil, errors.New("shutting down")
	}
	if tp.mu.conns == nil {
		tp.mu.conns, tp.mu.addrs = map[int32]*grpc.ClientConn{}, map[int32]string{}
	}
	if cc := tp.mu.conns[id]; cc != nil && tp.mu.addrs[id] == addr {
		return replpb.NewTransactionsClient(cc), nil
	} else if cc != nil {
		_ = cc.Close()
		delete(tp.mu.conns, id)
	}
	cc, _, err := s.repl.Dial(id)
	if err != nil {
		return nil, err
	}
	tp.mu.conns[id], tp.mu.addrs[id] = cc, addr
	return replpb.NewTransactionsClient(cc), nil
}

func (tp *txnPeers) close() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.mu.closed = true
	for id, cc := range tp.mu.conns {
		_ = cc.Close()
		delete(tp.mu.conns, id)
	}
}

// call sends one kmsg request to broker id's Transactions service with
// method and decodes the response into resp.
func (tp *txnPeers) call(ctx context.Context, s *Server, id int32, req kmsg.Request, resp kmsg.Response,
	method func(replpb.TransactionsClient, context.Context, *replpb.KafkaMessage, ...grpc.CallOption) (*replpb.KafkaMessage, error)) error {
	cl, err := tp.client(s, id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, txnCallTimeout)
	defer cancel()
	got, err := method(cl, ctx, &replpb.KafkaMessage{BrokerId: s.cfg.BrokerID, Version: int32(req.GetVersion()), Body: req.AppendTo(nil), ApiKey: int32(req.Key())})
	if err != nil {
		return err
	}
	if int16(got.GetVersion()) != req.GetVersion() {
		return fmt.Errorf("broker %d answered version %d to version %d", id, got.GetVersion(), req.GetVersion())
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(got.GetBody()); err != nil {
		return fmt.Errorf("broker %d: response does not decode: %w", id, err)
	}
	return nil
}

func (tp *txnPeers) writeTxnMarkers(ctx context.Context, s *Server, id int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	err := tp.call(ctx, s, id, req, resp, replpb.TransactionsClient.WriteTxnMarkers)
	return resp, err
}

func (tp *txnPeers) verify(ctx context.Context, s *Server, id int32, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	err := tp.call(ctx, s, id, req, resp, replpb.TransactionsClient.VerifyTxnPartitions)
	return resp, err
}

// txnService serves the Transactions gRPC service.
type txnService struct {
	replpb.UnimplementedTransactionsServer
	s *Server
}

// decode checks the caller and decodes its request at the version it
// names, which must lie in [minV, maxV].
func (t txnService) decode(ctx context.Context, msg *replpb.KafkaMessage, req kmsg.Request, minV, maxV int16) error {
	if t.s.repl == nil {
		return status.Error(codes.Unavailable, "broker starting")
	}
	if err := t.s.repl.CheckBroker(ctx, msg.GetBrokerId()); err != nil {
		return err
	}
	v := msg.GetVersion()
	if v < int32(minV) || v > int32(maxV) {
		return status.Errorf(codes.InvalidArgument, "version %d not in [%d, %d]", v, minV, maxV)
	}
	req.SetVersion(int16(v))
	if err := req.ReadFrom(msg.GetBody()); err != nil {
		return status.Errorf(codes.InvalidArgument, "request does not decode: %v", err)
	}
	return nil
}

// WriteTxnMarkers writes markers from a coordinator on another broker.
func (t txnService) WriteTxnMarkers(ctx context.Context, msg *replpb.KafkaMessage) (*replpb.KafkaMessage, error) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	if err := t.decode(ctx, msg, req, 0, writeTxnMarkersV2Version); err != nil {
		return nil, err
	}
	resp := t.s.writeTxnMarkers(ctx, req)
	resp.Version = req.Version
	return &replpb.KafkaMessage{Version: int32(req.Version), Body: resp.AppendTo(nil)}, nil
}

// VerifyTxnPartitions answers a partition leader's verification.
func (t txnService) VerifyTxnPartitions(ctx context.Context, msg *replpb.KafkaMessage) (*replpb.KafkaMessage, error) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	if err := t.decode(ctx, msg, req, verifyTxnVersion, addPartitionsToTxnMaxVersion); err != nil {
		return nil, err
	}
	for _, tr := range req.Transactions {
		if !tr.VerifyOnly && req.Version < addTxnPartitionVersion {
			return nil, status.Errorf(codes.InvalidArgument, "partitions are added between brokers from version %d only", addTxnPartitionVersion)
		}
	}
	resp := t.s.addPartitionsBatched(req)
	return &replpb.KafkaMessage{Version: int32(req.Version), Body: resp.AppendTo(nil)}, nil
}
