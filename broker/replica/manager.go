package replica

import (
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/proto/replpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Config is what the Manager needs of the broker's configuration. The
// broker builds it from its own Config when it starts.
type Config struct {
	// BrokerID is this broker's id (broker.id).
	BrokerID int32
	// BrokerEpoch is sent as the follower's broker epoch when a
	// replication stream opens; leaders do not check it.
	BrokerEpoch int64
	// LagTimeMax is replica.lag.time.max.ms: a follower that has not
	// caught up for that long leaves the ISR.
	LagTimeMax time.Duration
	// FetchMaxBytes is replica.fetch.max.bytes: the most a leader sends
	// of one partition in one stream message (at least one batch).
	FetchMaxBytes int32
	// FetchBackoff is replica.fetch.backoff.ms: the longest a follower
	// waits before trying a partition (or a stream) again after an error.
	FetchBackoff time.Duration
	// HWCheckpointInterval is
	// replica.high.watermark.checkpoint.interval.ms.
	HWCheckpointInterval time.Duration
	// MaxPartitions is strata.max.broker.partitions: the most partitions
	// a follower can fetch from this broker, which bounds the size of
	// the messages the Replication service accepts (guard.go).
	MaxPartitions int

	// LeaderThrottledRate and FollowerThrottledRate are
	// leader.replication.throttled.rate and
	// follower.replication.throttled.rate in bytes per second at start
	// (Unthrottled or negative: none); SetThrottledRates changes them.
	LeaderThrottledRate, FollowerThrottledRate int64

	// Listener, if not nil, is where the Replication service serves
	// other brokers' fetchers; the Manager owns it from NewManager on.
	// Nil for a single node, which has no followers.
	Listener net.Listener
	// ServerTLS, if not nil, makes the Replication service on Listener
	// serve mutual TLS: it requires a client certificate verified by
	// ServerTLS.ClientCAs (whatever ServerTLS.ClientAuth says), and
	// accepts a call only from a peer whose certificate is valid for the
	// host that the broker id it claims registered (tls.go). A
	// GetConfigForClient (tlsconfig.Server's, for reloads) is kept.
	ServerTLS *tls.Config
	// ClientTLS, if not nil, makes the fetchers dial leaders over TLS:
	// it returns the configuration for dialing the leader registered at
	// host, which presents this broker's certificate (for the leaders'
	// ServerTLS) and verifies the leader's certificate for host
	// (tlsconfig.Server.ClientConfig does both with the certificates
	// loaded last; ForHost adapts a fixed configuration).
	ClientTLS func(host string) *tls.Config
	// Logger receives the replication log lines.
	Logger *slog.Logger
	// Metrics is where the Manager registers its metrics.
	Metrics prometheus.Registerer
	// Now is the clock of follower reports, lag checks and leadership
	// changes.
	Now func() time.Time
	// Done is closed when the broker begins shutting down: fetchers,
	// streams and waits in Await end then, before Stop is called.
	Done <-chan struct{}
	// Services, if set, registers the broker's other inter-broker gRPC
	// services (the transaction coordinator's) on the replication
	// listener's server before it serves. They get its limits, panic
	// recovery and TLS; they check their callers with CheckBroker.
	Services func(*grpc.Server)
}

// Manager runs replication for the broker (Kafka's ReplicaManager): the
// gRPC Replication service other brokers fetch from (service.go), a
// fetcher per leader this broker follows (fetcher.go), and a loop that
// shrinks the ISR of the partitions this broker leads when followers
// lag, and checkpoints high watermarks. A single node (embedded
// coordinator) has no listener and no fetchers: its partitions have one
// replica, whose ISR is itself.
type Manager struct {
	cfg  Config
	host Host
	log  *slog.Logger
	now  func() time.Time
	done <-chan struct{}
	srv  *grpc.Server
	wg   sync.WaitGroup

	mu       sync.Mutex
	fetchers map[int32]*fetcher
	stopped  bool

	// leaderQuota and followerQuota are the replication throttles
	// (throttle.go).
	leaderQuota, followerQuota *Throttle

	purgatory        prometheus.Gauge
	shrinks, expands prometheus.Counter
}

// NewManager creates the manager over the broker's partitions (host)
// and registers its metrics. With cfg.Listener it starts serving the
// Replication service at once, so that followers can connect as soon
// as this broker is registered; Start runs the ISR and checkpoint loop.
func NewManager(cfg Config, host Host) *Manager {
	m := &Manager{cfg: cfg, host: host, log: cfg.Logger, now: cfg.Now, done: cfg.Done, fetchers: map[int32]*fetcher{}}
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
	cfg.Metrics.MustRegister(m.purgatory, m.shrinks, m.expands)
	m.leaderQuota = NewThrottle(cfg.LeaderThrottledRate, cfg.Now)
	m.followerQuota = NewThrottle(cfg.FollowerThrottledRate, cfg.Now)
	throttleMetrics(cfg.Metrics, m.leaderQuota, m.followerQuota)
	if cfg.Listener == nil {
		return m
	}
	ln := cfg.Listener
	m.srv = grpc.NewServer(append(m.serverOptions(),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 5 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
	)...)
	replpb.RegisterReplicationServer(m.srv, &replicationService{m: m})
	if cfg.Services != nil {
		cfg.Services(m.srv)
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.srv.Serve(ln); err != nil {
			m.log.Debug("replication listener stopped", "err", err)
		}
	}()
	m.log.Info("replication listening", "addr", ln.Addr().String())
	return m
}

// SetThrottledRates changes leader.replication.throttled.rate and
// follower.replication.throttled.rate (bytes per second, Unthrottled or
// negative for none) at run time; streams that are holding data back pick
// the new rates up at their next check.
func (m *Manager) SetThrottledRates(leader, follower int64) {
	m.leaderQuota.SetRate(leader)
	m.followerQuota.SetRate(follower)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.fetchers {
		f.poke()
	}
}

// ThrottledRates returns the rates in force (Unthrottled for none).
func (m *Manager) ThrottledRates() (leader, follower int64) {
	return m.leaderQuota.Limit(), m.followerQuota.Limit()
}

// ThrottledBytes are the bytes of throttled replicas each quota has
// counted (strata_replication_throttled_bytes_total).
func (m *Manager) ThrottledBytes() (leader, follower int64) {
	return m.leaderQuota.Bytes(), m.followerQuota.Bytes()
}

// Start runs the ISR and checkpoint loop.
func (m *Manager) Start() {
	m.wg.Add(1)
	go m.loop()
}

// Stop ends the fetchers, the service and the loop, and waits for them
// (and for ISR writes in flight). Call it after Config.Done is closed.
func (m *Manager) Stop() {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	if m.srv != nil {
		m.srv.Stop()
	}
	m.wg.Wait()
}

// Sync applies a metadata snapshot to every hosted partition: leadership
// and ISR for the partitions this broker leads (recording a new leader
// epoch in the log when it has just become the leader), the fetcher for
// those it follows. The broker calls it after each snapshot it applies,
// once the snapshot's partitions are open.
func (m *Manager) Sync(snap *coord.Snapshot) {
	self := m.cfg.BrokerID
	now := m.now()
	for _, p := range m.host.Partitions() {
		ti, ok := snap.Topics[p.topic]
		if !ok || ti.ID != p.topicID || int(p.index) >= len(ti.Partitions) {
			continue
		}
		pi := ti.Partitions[p.index]
		if p.syncLeadership(pi, now) {
			p.app.Lock()
			if err := p.log.Epochs().Assign(pi.State.LeaderEpoch, p.log.LogEndOffset()); err != nil {
				m.log.Error("recording the new leader epoch failed", "topic", p.topic, "partition", p.index, "err", err)
			}
			p.app.Unlock()
		}
		// The ISR may have changed (the controller removes dead
		// brokers): the high watermark may move, and the produces
		// waiting for it must see that now.
		p.AdvanceHighWatermark()
		switch leader := pi.State.Leader; {
		case leader == self || leader == coord.NoLeader:
			m.unfollow(p)
		default:
			m.follow(p, leader, pi.State.LeaderEpoch)
		}
	}
}

// Forget stops replicating a partition whose log is being closed or
// deleted: it is no longer followed, nor led (produces waiting in Await
// for its followers return LeadershipMoved at once).
func (m *Manager) Forget(p *Partition) {
	m.unfollow(p)
	p.stopLeading()
}

// loop shrinks lagging ISRs every half replica.lag.time.max.ms and
// checkpoints high watermarks every
// replica.high.watermark.checkpoint.interval.ms.
func (m *Manager) loop() {
	defer m.wg.Done()
	lag := m.cfg.LagTimeMax
	isrTick := time.NewTicker(max(lag/2, 10*time.Millisecond))
	defer isrTick.Stop()
	ckptTick := time.NewTicker(m.cfg.HWCheckpointInterval)
	defer ckptTick.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-isrTick.C:
			now := m.now()
			for _, p := range m.host.Partitions() {
				if isr := p.laggingISR(lag, now); isr != nil {
					m.changeISR(p, isr, "follower lagged past replica.lag.time.max.ms")
				}
			}
		case <-ckptTick.C:
			for _, p := range m.host.Partitions() {
				if err := p.log.CheckpointHighWatermark(); err != nil {
					m.log.Debug("high watermark checkpoint failed", "topic", p.topic, "partition", p.index, "err", err)
				}
			}
		}
	}
}
