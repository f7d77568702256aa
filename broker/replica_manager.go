package broker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/proto/replpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// replicaManager runs replication for the broker (Kafka's ReplicaManager):
// the gRPC Replication service other brokers fetch from
// (replica_server.go), a fetcher per leader this broker follows
// (replica_fetcher.go), and a loop that shrinks the ISR of the partitions
// this broker leads when followers lag, and checkpoints high watermarks.
// A single node (embedded coordinator) has no listener and no fetchers:
// its partitions have one replica, whose ISR is itself.
type replicaManager struct {
	s      *Server
	closed chan struct{}
	ln     net.Listener
	srv    *grpc.Server
	wg     sync.WaitGroup

	mu       sync.Mutex
	fetchers map[int32]*fetcher
	stopped  bool

	purgatory        prometheus.Gauge
	shrinks, expands prometheus.Counter
}

// newReplicaManager creates the manager and, for a broker in a ZooKeeper
// cluster, binds the replication listener (replication.port on the Kafka
// listener's host) so that the port can be registered.
func newReplicaManager(s *Server) (*replicaManager, error) {
	m := &replicaManager{s: s, closed: s.closed, fetchers: map[int32]*fetcher{}}
	m.purgatory = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_broker_produce_purgatory_size",
		Help: "Produce requests (acks=all) and group commits waiting for followers to replicate their records.",
	})
	m.shrinks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strata_broker_isr_shrinks_total",
		Help: "ISR shrinks written by this broker as a partition leader (a follower lagged past replica.lag.time.max.ms).",
	})
	m.expands = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strata_broker_isr_expands_total",
		Help: "ISR expansions written by this broker as a partition leader (a follower caught up).",
	})
	s.metrics.reg.MustRegister(m.purgatory, m.shrinks, m.expands)
	if s.cfg.ZooKeeperConnect == "" {
		return m, nil
	}
	host, _, err := net.SplitHostPort(s.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("broker: replication listener: %w", err)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(s.cfg.ReplicationPort)))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("broker: replication listener on %s (replication.port): %w", addr, err)
	}
	m.ln = ln
	s.self.ReplicationPort = int32(ln.Addr().(*net.TCPAddr).Port)
	m.srv = grpc.NewServer(
		grpc.MaxRecvMsgSize(maxReplicationMessage),
		grpc.MaxSendMsgSize(maxReplicationMessage),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 5 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
	)
	replpb.RegisterReplicationServer(m.srv, &replicationService{s: s})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.srv.Serve(ln); err != nil {
			s.log.Debug("replication listener stopped", "err", err)
		}
	}()
	s.log.Info("replication listening", "addr", ln.Addr().String())
	return m, nil
}

// start runs the ISR and checkpoint loop.
func (m *replicaManager) start() {
	m.wg.Add(1)
	go m.loop()
}

// stop ends the fetchers, the service and the loop, and waits for them.
func (m *replicaManager) stop() {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	if m.srv != nil {
		m.srv.Stop()
	}
	m.wg.Wait()
}

// sync applies a metadata snapshot to every hosted partition: leadership
// and ISR for the partitions this broker leads, the fetcher for those it
// follows.
func (m *replicaManager) sync(snap *coord.Snapshot) {
	s := m.s
	self := s.cfg.BrokerID
	now := s.nowFn()
	for _, t := range s.topicsSorted() {
		ti, ok := snap.Topics[t.name]
		if !ok || ti.ID != t.id {
			continue
		}
		for i, p := range t.parts {
			if p == nil || i >= len(ti.Partitions) {
				continue
			}
			pi := ti.Partitions[i]
			if p.syncLeadership(self, pi, now) {
				p.appendMu.Lock()
				if err := p.log.Epochs().Assign(pi.State.LeaderEpoch, p.log.LogEndOffset()); err != nil {
					s.log.Error("recording the new leader epoch failed", "topic", p.topic, "partition", p.index, "err", err)
				}
				p.appendMu.Unlock()
			}
			// The ISR may have changed (the controller removes dead
			// brokers): the high watermark may move, and the produces
			// waiting for it must see that now.
			p.advanceHighWatermark(self)
			switch leader := pi.State.Leader; {
			case leader == self || leader == coord.NoLeader:
				m.unfollow(p)
			default:
				m.follow(p, leader, pi.State.LeaderEpoch)
			}
		}
	}
}

// forget stops replicating a partition whose log is being closed.
func (m *replicaManager) forget(p *partition) { m.unfollow(p) }

// loop shrinks lagging ISRs every half replica.lag.time.max.ms and
// checkpoints high watermarks every
// replica.high.watermark.checkpoint.interval.ms.
func (m *replicaManager) loop() {
	defer m.wg.Done()
	s := m.s
	lag := s.cfg.ReplicaLagTimeMax
	isrTick := time.NewTicker(max(lag/2, 10*time.Millisecond))
	defer isrTick.Stop()
	ckptTick := time.NewTicker(s.cfg.HWCheckpointInterval)
	defer ckptTick.Stop()
	for {
		select {
		case <-m.closed:
			return
		case <-isrTick.C:
			now := s.nowFn()
			for _, p := range s.allPartitions() {
				if isr := p.laggingISR(s.cfg.BrokerID, lag, now); isr != nil {
					m.changeISR(p, isr, "follower lagged past replica.lag.time.max.ms")
				}
			}
		case <-ckptTick.C:
			for _, p := range s.allPartitions() {
				if err := p.log.CheckpointHighWatermark(); err != nil {
					s.log.Debug("high watermark checkpoint failed", "topic", p.topic, "partition", p.index, "err", err)
				}
			}
		}
	}
}

// changeISR writes a proposed ISR in the background and logs the outcome.
func (m *replicaManager) changeISR(p *partition, isr []int32, reason string) {
	s := m.s
	old, _ := p.isrSnapshot()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.writeISR(ctx, p, isr); err != nil {
			s.log.Info("ISR change not written; it is decided again", "topic", p.topic, "partition", p.index,
				"from", fmt.Sprint(old), "to", fmt.Sprint(isr), "err", err)
			return
		}
		what := "ISR expanded"
		if len(isr) < len(old) {
			what = "ISR shrunk"
			m.shrinks.Inc()
		} else {
			m.expands.Inc()
		}
		s.log.Info(what, "topic", p.topic, "partition", p.index, "from", fmt.Sprint(old), "to", fmt.Sprint(isr), "reason", reason)
	}()
}
