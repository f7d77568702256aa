package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/coord"
)

// Server is a single-node Kafka protocol server over the segment logs in
// its data directory, with the embedded coordinator.
//
// Lock order: adminMu, then mu. mu is never held across disk or network
// I/O; adminMu serializes topic changes (create, delete, alter, add
// partitions), which persist metadata and open or delete logs while
// holding it.
type Server struct {
	cfg    Config
	log    *slog.Logger
	meta   coord.Metadata
	pids   *producer.IDAllocator
	ln     net.Listener
	lock   *os.File // flock on the data directory
	self   coord.Broker
	nowFn  func() time.Time
	closed chan struct{} // closed by Shutdown: stop accepting and reading

	// groups is the consumer group coordinator over __consumer_offsets;
	// groupLoadErrs holds the partitions that failed to load into it. Both
	// are set by NewServer and not changed after.
	groups        *group.Coordinator
	groupLoadErrs map[int]error

	adminMu sync.Mutex
	mu      struct {
		sync.RWMutex
		topics map[string]*topicState
		byID   map[coord.TopicID]*topicState
		conns  map[*conn]struct{}
	}

	stats   stats
	connWG  sync.WaitGroup
	bgWG    sync.WaitGroup
	serveMu sync.Mutex
	served  bool
	closeMu sync.Mutex
	done    bool
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("broker: server closed")

// NewServer opens the data directory (taking an exclusive lock on it),
// loads the metadata, opens every partition log (running recovery) and
// binds the listener. Call Serve to accept connections and Shutdown to
// stop.
func NewServer(cfg Config) (*Server, error) {
	if cfg.TopicDefaults == nil {
		return nil, errors.New("broker: config not built by DefaultConfig or ConfigFromProperties")
	}
	s := &Server{cfg: cfg, log: cfg.Logger, closed: make(chan struct{}), nowFn: time.Now}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.mu.topics = map[string]*topicState{}
	s.mu.byID = map[coord.TopicID]*topicState{}
	s.mu.conns = map[*conn]struct{}{}

	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: data directory: %w", err)
	}
	lock, err := lockDir(cfg.LogDir)
	if err != nil {
		return nil, err
	}
	s.lock = lock
	fail := func(err error) (*Server, error) {
		_ = s.closeGroups()
		s.closeLogs()
		if s.meta != nil {
			_ = s.meta.Close()
		}
		if s.ln != nil {
			_ = s.ln.Close()
		}
		_ = s.lock.Close()
		return nil, err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fail(fmt.Errorf("broker: listen on %s: %w", cfg.Listen, err))
	}
	s.ln = ln
	host, port := cfg.advertised(ln.Addr())
	s.self = coord.Broker{ID: cfg.BrokerID, Host: host, Port: port}

	meta, existed, err := coord.OpenEmbedded(cfg.LogDir, s.self)
	if err != nil {
		return fail(err)
	}
	s.meta = meta
	pidBlocks, err := producer.OpenFileBlockSource(cfg.LogDir, producer.DefaultBlockSize)
	if err != nil {
		return fail(fmt.Errorf("broker: producer id blocks: %w", err))
	}
	s.pids = producer.NewIDAllocator(pidBlocks, s.log)
	if err := s.loadTopics(existed); err != nil {
		return fail(err)
	}
	if err := s.startGroups(); err != nil {
		return fail(err)
	}
	s.bgWG.Add(1)
	go s.retentionLoop()
	return s, nil
}

// lockDir takes an exclusive, non-blocking flock on dir/.lock so two
// brokers never share a data directory.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: lock data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("broker: data directory %s is in use by another broker: %w", dir, err)
	}
	return f, nil
}

// Addr is the address the listener is bound to.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats { return s.stats.snapshot() }

// ClusterID is the cluster's ID.
func (s *Server) ClusterID() string { return s.meta.ClusterID() }

// Serve accepts connections until Shutdown, then returns ErrServerClosed.
// It may be called once.
func (s *Server) Serve() error {
	s.serveMu.Lock()
	if s.served {
		s.serveMu.Unlock()
		return errors.New("broker: Serve called twice")
	}
	s.served = true
	s.serveMu.Unlock()
	var tempDelay time.Duration
	for {
		nc, err := s.ln.Accept()
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
				s.log.Warn("accept failed; retrying", "err", err, "delay", tempDelay)
				time.Sleep(tempDelay)
				continue
			}
			return fmt.Errorf("broker: accept: %w", err)
		}
		tempDelay = 0
		s.startConn(nc)
	}
}

// Shutdown stops accepting connections, lets every connection finish the
// requests it has read (long-polling fetches return at once with what they
// have; JoinGroup and SyncGroup waiting for a rebalance return unanswered,
// as the connection's context is cancelled), closes the connections, stops
// the group coordinator (which appends its queued writes), and then closes
// the logs (syncing them and writing their checkpoints) and the metadata
// coordinator. If ctx ends first, the remaining connections are closed
// forcibly before the logs are closed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeMu.Lock()
	if s.done {
		s.closeMu.Unlock()
		return ErrServerClosed
	}
	s.done = true
	s.closeMu.Unlock()

	close(s.closed)
	_ = s.ln.Close()
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
	if err := s.closeGroups(); err != nil {
		errs = append(errs, err)
	}
	s.bgWG.Wait()

	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	errs = append(errs, s.closeLogs()...)
	if err := s.meta.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := s.lock.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
		}
	}
}

// enforceRetention runs retention on every partition once.
func (s *Server) enforceRetention() {
	for _, p := range s.allPartitions() {
		deleted, err := p.log.EnforceRetention()
		if err != nil {
			s.log.Error("retention failed", "topic", p.topic, "partition", p.index, "err", err)
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
		}
	}
}
