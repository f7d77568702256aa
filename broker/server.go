package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/broker/replica"
	"github.com/stratastream/strata/broker/share"
	"github.com/stratastream/strata/broker/sharestate"
	"github.com/stratastream/strata/broker/txn"
	"github.com/stratastream/strata/coord"
)

// Server is a Kafka protocol server over the partition logs in its data
// directories (log.dirs), one broker of a cluster whose metadata lives in a
// coord.Coordinator: ZooKeeper when zookeeper.connect is set, else the
// embedded single-node coordinator in the data directory (cluster.go).
//
// Lock order: adminMu, then applyMu, then mu. mu is never held across
// disk or network I/O; adminMu serializes this broker's topic changes
// (create, delete, alter, add partitions) through the coordinator;
// applyMu serializes applying metadata to the logs (metadata_apply.go),
// which opens and deletes logs while holding it.
type Server struct {
	cfg    Config
	log    *slog.Logger
	coord  coord.Coordinator
	sub    *coord.Subscription // the metadata cache's events
	pids   *producer.IDAllocator
	lns    []*listener // cfg.Listeners, bound, in order
	dirs   *logDirs    // log.dirs, each locked (logdirs.go)
	self   coord.BrokerInfo
	nowFn  func() time.Time
	closed chan struct{} // closed by Shutdown: stop accepting and reading
	fatal  chan error    // buffered: why the broker must stop (Fatal)

	// groups is the consumer group coordinator over __consumer_offsets,
	// set by NewServer and not changed after; groupLoader loads into it
	// the partitions this broker leads (coordinator_loader.go), keeping
	// their load reports in groupReports.
	groups       *group.Coordinator
	groupLoader  coordinatorLoader
	groupReports struct {
		sync.Mutex
		m map[int]group.LoadReport
	}
	// groupTopics is the topic snapshot the coordinator resolves
	// consumer group subscriptions against, rebuilt when the metadata
	// snapshot it came from is replaced (groupTopicSnapshot).
	groupTopics struct {
		sync.Mutex
		from *coord.Snapshot
		snap *group.TopicSnapshot
	}

	// txns is the transaction coordinator over __transaction_state
	// (txn_coordinator.go), set by NewServer and not changed after;
	// txnLoader loads into it the partitions this broker leads, txnPeers
	// holds the connections of its inter-broker calls.
	txns      *txn.Coordinator
	txnLoader coordinatorLoader
	txnPeers  txnPeers

	// sharePersister stores share-partition state (the share
	// coordinator, or a test's); shares is the share group
	// manager over it (share_groups.go), set by NewServer; its group
	// configs come from shareGroupConfig (nil: the GROUP configs, group_config.go).
	sharePersister   sharestate.Persister
	shares           *share.Manager
	shareDLQ         *deadLetterWriter // share_dead_letter.go
	shareGroupConfig func(group string) share.GroupConfig
	// shareCoord is the share coordinator over __share_group_state
	// (share_coordinator.go), set by NewServer and not changed after;
	// shareStateLoader loads into it the partitions this broker leads.
	// sharePersister routes each share partition to its coordinator
	// (share_persister.go).
	shareCoord       *sharestate.Coordinator
	shareStateLoader coordinatorLoader

	// authz is the ACL authorizer (authorize.go), nil without
	// authorizer.class.name; set before the broker serves.
	authz *acl.Authorizer
	// tokens is the delegation token manager (delegation_tokens.go).
	tokens *tokenManager

	// tier is the broker's tiered storage (tiering.go), set by NewServer.
	tier *brokerTier

	// cleaner compacts the compacted partitions (log_cleaner.go), set
	// by NewServer.
	cleaner *logCleaner

	// repl runs replication (package replica; wired in replication.go),
	// set by NewServer.
	repl *replica.Manager
	// dynCfg holds the dynamic broker configs set at run time
	// (dynamic_broker_config.go).
	dynCfg dynamicBrokerConfig
	// groupCfgs holds the stored group configs (group_config.go).
	groupCfgs groupCfgs

	// ctrlCancel stops the controller goroutine, which closes ctrlDone.
	ctrlCancel context.CancelFunc
	ctrlDone   chan struct{}

	adminMu sync.Mutex
	applyMu sync.Mutex
	apply   applyState // guarded by applyMu
	mu      struct {
		sync.RWMutex
		topics map[string]*topicState
		byID   map[coord.TopicID]*topicState
		conns  map[*conn]struct{}
	}

	// quotas are the connection limits and reqMem the bound on queued
	// request bytes (limits.go), set by NewServer.
	quotas *connQuotas
	// clientQuotas are the client quotas (client_quotas.go).
	clientQuotas *clientQuotas
	reqMem       *requestMemory

	stats   stats
	metrics *brokerMetrics // metrics.go
	// started is set once NewServer has finished; accepting counts the
	// accept loops running; controllerActive is set while this broker's
	// controller candidate holds the role; coordLostAt is when the
	// coordinator became unreachable (Unix nanoseconds), 0 while it is
	// reachable (health.go, metrics.go).
	started          atomic.Bool
	accepting        atomic.Int32
	controllerActive atomic.Bool
	coordLostAt      atomic.Int64
	connWG           sync.WaitGroup
	bgWG             sync.WaitGroup
	serveMu          sync.Mutex
	served           bool
	closeMu          sync.Mutex
	done             bool

	// progress shows tests that background work happened (stats.go).
	progress progress

	// moveMu serializes starting and stopping replica moves between log
	// directories (logdir_move.go); testMoveHook, set by tests before a
	// move, is called at its steps.
	moveMu       sync.Mutex
	testMoveHook func(point, stage string)
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("broker: server closed")

// NewServer opens the data directories (taking an exclusive lock on each),
// binds the listener, opens the coordinator (connecting to ZooKeeper if
// zookeeper.connect is set), opens the logs of the partitions this broker
// hosts (running recovery), registers the broker, and starts its
// controller candidate and metadata cache (cluster.go). Call Serve to
// accept connections and Shutdown to stop. A broker id that another live
// broker has registered is refused with an error wrapping
// coord.ErrBrokerIDInUse.
func NewServer(cfg Config) (*Server, error) {
	if cfg.TopicDefaults == nil {
		return nil, errors.New("broker: config not built by DefaultConfig or ConfigFromProperties")
	}
	s := &Server{cfg: cfg, log: cfg.Logger, closed: make(chan struct{}), fatal: make(chan error, 1), nowFn: time.Now,
		reqMem: newRequestMemory(cfg.QueuedMaxRequestBytes)}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.mu.topics = map[string]*topicState{}
	s.mu.byID = map[coord.TopicID]*topicState{}
	s.mu.conns = map[*conn]struct{}{}
	s.groupLoader = s.groupLoading()
	s.groupLoader.init()
	s.groupReports.m = map[int]group.LoadReport{}
	s.txnLoader = s.txnLoading()
	s.txnLoader.init()
	s.shareStateLoader = s.shareLoading()
	s.shareStateLoader.init()
	s.clientQuotas = newClientQuotas(s.log, cfg.QuotaWindowNum, cfg.QuotaWindowSizeSeconds, s.nowFn)
	s.metrics = newBrokerMetrics(s)
	s.tokens = newTokenManager(s)
	s.logIgnoredKafkaSettings()

	if len(cfg.LogDirs) == 0 {
		return nil, errors.New("broker: no log.dirs")
	}
	dirs, err := openLogDirs(cfg.LogDirs, s.log)
	if err != nil {
		return nil, err
	}
	s.dirs = dirs
	fail := func(err error) (*Server, error) {
		s.stopHTTP()
		s.stopBackground()
		s.closeShareGroups()
		_ = s.closeGroups()
		_ = s.closeTxns()
		s.closeShareCoordinator()
		s.closeLogs()
		if s.coord != nil {
			_ = s.coord.Close()
		}
		s.closeListeners()
		_ = s.dirs.close()
		return nil, err
	}

	if s.quotas, err = newConnQuotas(&s.cfg); err != nil {
		return fail(err)
	}
	if err := s.bindListeners(); err != nil {
		return fail(err)
	}
	if err := s.startHTTP(); err != nil {
		return fail(err)
	}
	if err := s.openTiering(); err != nil {
		return fail(err)
	}
	if s.cleaner, err = newLogCleaner(s, cfg.Cleaner); err != nil {
		return fail(err)
	}
	if s.repl, err = s.newReplicaManager(); err != nil {
		return fail(err)
	}
	s.sharePersister = cfg.SharePersister
	if err := s.startShareGroups(); err != nil {
		return fail(fmt.Errorf("broker: share groups: %w", err))
	}
	if err := s.joinCluster(); err != nil {
		return fail(err)
	}
	s.repl.Start()
	s.restoreTopics()
	s.bgWG.Add(2)
	go s.retentionLoop()
	go s.logDirLoop()
	s.cleaner.start()
	s.tokens.start()
	s.started.Store(true)
	return s, nil
}

// Addr is the address the first listener (in listeners) is bound to.
func (s *Server) Addr() net.Addr { return s.lns[0].ln.Addr() }

// ListenerAddr is the address the named listener is bound to, nil if
// there is no such listener.
func (s *Server) ListenerAddr(name string) net.Addr {
	for _, l := range s.lns {
		if l.name == strings.ToUpper(name) {
			return l.ln.Addr()
		}
	}
	return nil
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats { return s.stats.snapshot() }

// ClusterID is the cluster's ID.
func (s *Server) ClusterID() string { return s.coord.ClusterID() }

// Fatal delivers the reason the broker cannot go on serving: its
// registration was lost for good after a ZooKeeper session expiry
// (another broker took its id). The caller should Shutdown and exit with
// an error.
func (s *Server) Fatal() <-chan error { return s.fatal }

// Serve accepts connections until Shutdown, then returns ErrServerClosed.
// It may be called once. While max.connections are open it stops
// accepting (connections wait in the listen backlog); a connection from
// an address at its max.connections.per.ip is closed at once (limits.go).
func (s *Server) Serve() error {
	s.serveMu.Lock()
	if s.served {
		s.serveMu.Unlock()
		return errors.New("broker: Serve called twice")
	}
	s.served = true
	s.serveMu.Unlock()
	errs := make(chan error, len(s.lns))
	for _, l := range s.lns {
		go func() { errs <- s.acceptLoop(l) }()
	}
	var first error
	for range s.lns {
		err := <-errs
		if first == nil || errors.Is(first, ErrServerClosed) && !errors.Is(err, ErrServerClosed) {
			first = err
		}
		if !errors.Is(err, ErrServerClosed) {
			// A listener failed for good: stop accepting on the
			// others too, and tell the caller.
			s.closeListeners()
		}
	}
	return first
}

// acceptLoop accepts l's connections until Shutdown (ErrServerClosed) or
// an accept error that retrying does not cure.
func (s *Server) acceptLoop(l *listener) error {
	s.accepting.Add(1)
	defer s.accepting.Add(-1)
	var tempDelay time.Duration
	for {
		if !s.quotas.waitSlot(s.closed) {
			return ErrServerClosed
		}
		nc, err := l.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return ErrServerClosed
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
				// Back off and retry, as net/http does.
				tempDelay = min(max(2*tempDelay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "listener", l.name, "err", err, "delay", tempDelay)
				time.Sleep(tempDelay)
				continue
			}
			return fmt.Errorf("broker: accept on listener %s: %w", l.name, err)
		}
		tempDelay = 0
		s.startConn(l, nc)
	}
}

// Shutdown leaves the cluster and stops the broker. With
// controlled.shutdown.enable and other brokers live, it first asks the
// controller to move this broker's partition leadership away (clients get
// NOT_LEADER_OR_FOLLOWER and go to the new leaders). Then it stops
// accepting connections, lets every connection finish the requests it has
// read (long-polling fetches return at once with what they have; JoinGroup
// and SyncGroup waiting for a rebalance return unanswered, as the
// connection's context is cancelled), closes the connections, stops the
// group coordinator (which appends its queued writes), resigns the
// controller role if it holds it, removes its registration, and closes the
// logs (syncing them and writing their checkpoints) and the coordinator.
// If ctx ends first, the remaining connections are closed forcibly before
// the logs are closed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeMu.Lock()
	if s.done {
		s.closeMu.Unlock()
		return ErrServerClosed
	}
	s.done = true
	s.closeMu.Unlock()

	if s.cfg.ControlledShutdown {
		s.controlledShutdown(ctx)
	}
	close(s.closed)
	s.closeListeners()
	s.mu.Lock()
	for c := range s.mu.conns {
		c.stopReading()
	}
	s.mu.Unlock()

	finished := make(chan struct{})
	go func() { s.connWG.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.mu.conns {
			_ = c.nc.Close()
		}
		s.mu.Unlock()
		<-finished
	}
	var errs []error
	s.closeShareGroups()
	if err := s.closeGroups(); err != nil {
		errs = append(errs, err)
	}
	if err := s.closeTxns(); err != nil {
		errs = append(errs, err)
	}
	s.closeShareCoordinator()
	s.stopBackground()
	s.stopHTTP()
	s.leaveCluster()

	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	s.applyMu.Lock()
	s.apply.closed = true
	s.applyMu.Unlock()
	errs = append(errs, s.closeLogs()...)
	if err := s.coord.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := s.dirs.close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// stopBackground stops the background goroutines (retention, metadata
// cache, group loader, controller) and waits for them.
func (s *Server) stopBackground() {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	if s.ctrlCancel != nil {
		s.ctrlCancel()
		<-s.ctrlDone
	}
	s.bgWG.Wait()
	if s.cleaner != nil {
		s.cleaner.shutdown()
	}
	if s.repl != nil {
		s.repl.Stop()
	}
	s.stopTiering()
}

// shuttingDown reports whether Shutdown has begun.
func (s *Server) shuttingDown() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// retentionLoop enforces retention on every partition each
// RetentionCheckInterval.
func (s *Server) retentionLoop() {
	defer s.bgWG.Done()
	t := time.NewTicker(s.cfg.RetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.closed:
			return
		case <-t.C:
			s.enforceRetention()
			s.progress.retentionPasses.Add(1)
		}
	}
}

// enforceRetention runs retention on every partition once.
func (s *Server) enforceRetention() {
	for _, p := range s.allPartitions() {
		deleted, err := p.log.EnforceRetention()
		if err != nil {
			s.log.Error("retention failed", "topic", p.topic, "partition", p.index, "err", err)
			s.storageFailure(p, err)
			continue
		}
		for _, seg := range deleted {
			s.log.Info("retention deleted segment", "topic", p.topic, "partition", p.index, "base_offset", seg.BaseOffset, "next_offset", seg.NextOffset, "bytes", seg.Size)
		}
		if len(deleted) > 0 {
			p.trimProducers()
		}
		if err := p.snapshotProducers(); err != nil {
			s.log.Error("producer state snapshot failed", "topic", p.topic, "partition", p.index, "err", err)
			s.storageFailure(p, err)
		}
	}
}
