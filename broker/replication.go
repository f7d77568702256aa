package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/broker/replica"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/proto/replpb"
	"github.com/stratastream/strata/tiering"
	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/grpc"
)

// This file connects replication (package replica) to the server. The
// server creates the replica.Manager before it joins the cluster (so that
// the replication port can be registered), hands it every metadata
// snapshot after applying it (metadata_apply.go), and stops it at
// shutdown. Each partition gets its replica.Partition when its log opens
// (topics.go). The Produce handler and the group coordinator's offsets
// log advance the high watermark after their appends and wait in
// awaitHighWatermark for acks=all; the Kafka errors of that wait are
// decided here.
//
// The manager sees the server through replicaHost (its partitions and
// the coordinator) and each partition through partitionAppender (its
// append lock and producer state).

// newReplicaManager creates the replication manager from the broker's
// configuration. A broker in a ZooKeeper cluster binds the replication
// listener (replication.port on the inter-broker listener's host, over
// mutual TLS if that listener runs TLS) and records the bound port in
// its registration; a single node has no followers and no listener.
func (s *Server) newReplicaManager() (*replica.Manager, error) {
	cfg := replica.Config{
		BrokerID:              s.cfg.BrokerID,
		BrokerEpoch:           s.self.Epoch,
		LagTimeMax:            s.cfg.ReplicaLagTimeMax,
		FetchMaxBytes:         s.cfg.ReplicaFetchMaxBytes,
		FetchBackoff:          s.cfg.ReplicaFetchBackoff,
		HWCheckpointInterval:  s.cfg.HWCheckpointInterval,
		LeaderThrottledRate:   s.cfg.LeaderReplicationThrottledRate,
		FollowerThrottledRate: s.cfg.FollowerReplicationThrottledRate,
		MaxPartitions:         int(s.cfg.MaxBrokerPartitions),
		Logger:                s.log,
		Metrics:               s.metrics.reg,
		Now:                   s.nowFn,
		Done:                  s.closed,
		Services:              func(g *grpc.Server) { replpb.RegisterTransactionsServer(g, txnService{s: s}) },
	}
	if s.cfg.ZooKeeperConnect != "" {
		addr := net.JoinHostPort(s.interBrokerBind(), strconv.Itoa(int(s.cfg.ReplicationPort)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("broker: replication listener on %s (replication.port): %w", addr, err)
		}
		cfg.Listener = ln
		s.self.ReplicationPort = int32(ln.Addr().(*net.TCPAddr).Port)
		// Over mutual TLS when the inter-broker listener runs TLS, with
		// its certificates: a follower proves its broker id by a
		// certificate for the host that id registered.
		if ib := s.listener(s.cfg.InterBrokerListener); ib != nil && ib.tls != nil {
			cfg.ServerTLS, cfg.ClientTLS = ib.tls.Config(), ib.tls.ClientConfig
		}
	}
	return replica.NewManager(cfg, replicaHost{s}), nil
}

// awaitHighWatermark parks an acks=all produce (or a group commit) until
// the high watermark reaches target (replica.Manager.Await) and turns
// the outcome into the partition's Kafka error. minISR > 0 also requires
// that many in-sync replicas when the batch is committed.
func (s *Server) awaitHighWatermark(ctx context.Context, p *partition, epoch int32, target int64, minISR int, deadline time.Time) error {
	res, isr := s.repl.Await(ctx, p.repl, epoch, target, deadline)
	switch res {
	case replica.Replicated:
		if isr < minISR {
			return newKafkaError(kerr.NotEnoughReplicasAfterAppend, "in-sync replicas %d fell below min.insync.replicas %d", isr, minISR)
		}
		return nil
	case replica.LeadershipMoved:
		return newKafkaError(kerr.NotLeaderForPartition, "leadership of %s-%d moved while the produce waited for replication", p.topic, p.index)
	case replica.DeadlinePassed:
		if isr < minISR {
			return newKafkaError(kerr.NotEnoughReplicasAfterAppend, "in-sync replicas %d are below min.insync.replicas %d", isr, minISR)
		}
		return newKafkaError(kerr.RequestTimedOut, "followers did not replicate the batch of %s-%d within the request timeout", p.topic, p.index)
	case replica.ShuttingDown:
		return newKafkaError(kerr.NotLeaderForPartition, "broker shutting down")
	default: // replica.Cancelled
		return newKafkaError(kerr.RequestTimedOut, "client went away")
	}
}

// replicaHost is the server as the replication manager sees it.
type replicaHost struct{ s *Server }

// Partitions implements replica.Host.
func (h replicaHost) Partitions() []*replica.Partition {
	var out []*replica.Partition
	for _, t := range h.s.topicsSorted() {
		for _, p := range t.parts {
			if p != nil {
				out = append(out, p.repl)
			}
		}
	}
	return out
}

// Partition implements replica.Host.
func (h replicaHost) Partition(topic string, index int32) (*replica.Partition, bool) {
	t := h.s.topic(topic)
	if t == nil || !t.hasPartition(index) {
		return nil, false
	}
	p := t.local(index)
	if p == nil {
		return nil, true
	}
	return p.repl, true
}

// Snapshot implements replica.Coordinator.
func (h replicaHost) Snapshot() *coord.Snapshot { return h.s.coord.Snapshot() }

// PartitionState implements replica.Coordinator.
func (h replicaHost) PartitionState(ctx context.Context, topic string, partition int32) (coord.PartitionState, int32, error) {
	return h.s.coord.PartitionState(ctx, topic, partition)
}

// UpdatePartitionState implements replica.Coordinator.
func (h replicaHost) UpdatePartitionState(ctx context.Context, topic string, partition int32, st coord.PartitionState, version int32) (int32, error) {
	return h.s.coord.UpdatePartitionState(ctx, topic, partition, st, version)
}

// partitionAppender is a partition as its replication state sees it:
// the append lock, the producer state (idempotence.go), and what the
// object store holds of it (tiering.go).
type partitionAppender struct {
	s  *Server
	p  *partition
	id coord.TopicID
}

// Lock implements replica.Appender.
func (a partitionAppender) Lock() { a.p.appendMu.Lock() }

// Unlock implements replica.Appender.
func (a partitionAppender) Unlock() { a.p.appendMu.Unlock() }

// AppendReplicatedLocked implements replica.Appender.
func (a partitionAppender) AppendReplicatedLocked(batches []byte) error {
	return a.p.appendReplicatedLocked(batches)
}

// ReloadProducersLocked implements replica.Appender.
func (a partitionAppender) ReloadProducersLocked() error { return a.p.reloadProducersLocked() }

// RemoteStateAt implements replica.Appender: for a partition whose topic
// is tiered (or was: remote data stays), the leader epochs of the remote
// segments below offset and the producer snapshot uploaded with the
// remote segment that ends at offset, read from the store's manifest.
func (a partitionAppender) RemoteStateAt(ctx context.Context, offset int64) (replica.RemoteState, error) {
	p, s := a.p, a.s
	if s.tier == nil || p.tier == nil || (!p.tier.gate.Tiered() && p.tier.manifest() == nil) {
		return replica.RemoteState{}, nil
	}
	m, _, err := tiering.LoadManifest(ctx, s.tier.store, p.topic, a.id.String(), p.index)
	if errors.Is(err, tiering.ErrNotFound) {
		return replica.RemoteState{}, nil
	}
	if err != nil {
		return replica.RemoteState{}, err
	}
	st := replica.RemoteState{Epochs: m.EpochsBefore(offset)}
	data, ok, err := tiering.FetchProducerSnapshotAt(ctx, s.tier.store, m, offset)
	if err != nil {
		return replica.RemoteState{}, err
	}
	if ok {
		st.ProducerSnapshot = data
	}
	return st, nil
}

// StartOverLocked implements replica.Appender.
func (a partitionAppender) StartOverLocked(offset int64, st replica.RemoteState) error {
	p := a.p
	if err := p.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	for _, e := range st.Epochs {
		if err := p.log.Epochs().Assign(e.Epoch, e.StartOffset); err != nil {
			return err
		}
	}
	if st.ProducerSnapshot != nil {
		if err := producer.WriteSnapshot(p.path(), offset, st.ProducerSnapshot); err != nil {
			return err
		}
	}
	return p.reloadProducersLocked()
}
