package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/coord"
)

// This file is the broker's life in the cluster, as coord/doc.go
// prescribes: open the coordinator (ZooKeeper under zookeeper.connect, or
// the embedded one in the data directory), subscribe to its metadata,
// open the logs of hosted partitions, register, run a controller candidate
// (every broker campaigns; one wins), apply metadata events as they come,
// and on shutdown move leadership away, resign, deregister.
//
// While ZooKeeper is unreachable the broker keeps serving produce and
// fetch for the partitions it leads with the metadata it has (the
// coordinator logs the outage once, with its cause); admin requests that
// change metadata fail. After a session expiry the coordinator registers
// the broker again and the metadata is reloaded; if the id was taken
// meanwhile the broker stops (Fatal).

// controlledShutdownTimeout bounds the wait for the controller's answer
// to a controlled shutdown.
const controlledShutdownTimeout = 15 * time.Second

// leaveTimeout bounds deregistering at shutdown.
const leaveTimeout = 5 * time.Second

// joinCluster opens the coordinator, checks the data directory against
// the cluster, opens the hosted logs, registers the broker and starts the
// group coordinator, the metadata loop and the controller candidate.
func (s *Server) joinCluster() error {
	cfg := s.cfg
	embedded := cfg.ZooKeeperConnect == ""
	metadataExisted := true
	if err := s.dirs.scan(); err != nil {
		return err
	}
	if embedded {
		_, err := os.Stat(filepath.Join(cfg.MetaDir(), coord.MetadataFile))
		metadataExisted = err == nil
		if !metadataExisted {
			if err := s.refuseOrphanPartitions(); err != nil {
				return err
			}
		}
	}
	ctx := context.Background()
	c, err := coord.Open(ctx, coord.Config{
		ZooKeeperConnect: cfg.ZooKeeperConnect,
		SessionTimeout:   cfg.ZooKeeperSessionTimeout,
		ConnectTimeout:   cfg.ZooKeeperConnectionTimeout,
		DataDir:          cfg.MetaDir(),
		Logger:           s.log.With("component", "coord"),
	})
	if err != nil {
		return fmt.Errorf("broker: coordinator: %w", err)
	}
	s.coord = c
	// The dynamic broker configs override the properties file's before
	// anything runs with them (Kafka's DynamicBrokerConfig.initialize);
	// the watch is set first so that no change is missed.
	s.followEntityConfigs(s.loadDynamicBrokerConfigs)
	s.followEntityConfigs(s.loadClientQuotas)
	s.followEntityConfigs(s.loadGroupConfigs)
	if err := s.startAuthorizer(); err != nil {
		return err
	}
	for _, d := range s.dirs.online() {
		err := checkMetaProperties(d.path, cfg.BrokerID, c.ClusterID())
		switch {
		case err == nil:
		case d != s.dirs.dirs[0] && isStorageError(err):
			s.logDirFailed(d, err)
		default:
			return err
		}
	}
	pidBlocks, err := producer.OpenFileBlockSource(cfg.MetaDir(), producer.DefaultBlockSize)
	if err != nil {
		return fmt.Errorf("broker: producer id blocks: %w", err)
	}
	s.pids = producer.NewIDAllocator(brokerBlockSource{src: pidBlocks, broker: cfg.BrokerID}, s.log)

	snap, sub := c.Subscribe()
	s.sub = sub
	if err := s.removeStrayPartitions(snap, embedded && metadataExisted); err != nil {
		return err
	}
	s.applySnapshot(snap)
	epoch, err := c.Register(ctx, s.self)
	if err != nil {
		if errors.Is(err, coord.ErrBrokerIDInUse) {
			return fmt.Errorf("broker: refusing to start: %w", err)
		}
		return fmt.Errorf("broker: register broker %d: %w", cfg.BrokerID, err)
	}
	s.log.Info("broker registered", "broker_id", cfg.BrokerID, "broker_epoch", epoch, "cluster_id", c.ClusterID(),
		"zookeeper", cfg.ZooKeeperConnect, "advertised", fmt.Sprintf("%s:%d", s.self.Host, s.self.Port), "rack", cfg.Rack)
	s.applySnapshot(c.Snapshot())
	if err := s.startGroups(); err != nil {
		return err
	}
	s.applySnapshot(c.Snapshot())
	s.groupLoader.sync() // the groups this broker coordinates, before it serves
	if err := s.startTxns(); err != nil {
		return err
	}
	s.applySnapshot(c.Snapshot())
	s.txnLoader.sync()
	if err := s.startShareCoordinator(); err != nil {
		return err
	}
	s.applySnapshot(c.Snapshot())
	s.shareStateLoader.sync()

	s.bgWG.Add(4)
	go s.metadataLoop()
	go s.groupLoader.run()
	go s.txnLoader.run()
	go s.shareStateLoader.run()
	s.startController()
	if embedded {
		// A single node is its own controller: serve once it says so.
		s.awaitController(embeddedControllerWait)
	}
	return nil
}

// embeddedControllerWait bounds the wait for a single node's election.
const embeddedControllerWait = 5 * time.Second

// awaitController waits up to d for the cluster to have a controller.
func (s *Server) awaitController(d time.Duration) {
	deadline := time.Now().Add(d)
	for s.coord.Snapshot().Controller.ID == coord.NoLeader && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// refuseOrphanPartitions refuses data directories that hold partition
// directories but no embedded metadata file: the file names their topics,
// and starting without it would lose them.
func (s *Server) refuseOrphanPartitions() error {
	dirs := s.dirs.partitionDirs()
	for _, name := range slices.Sorted(maps.Keys(dirs)) {
		return fmt.Errorf("broker: %s holds partition directory %s but no %s; refusing to start without the metadata that names its topics",
			filepath.Dir(dirs[name]), name, filepath.Join(s.cfg.MetaDir(), coord.MetadataFile))
	}
	return nil
}

// metadataLoop applies the coordinator's events until shutdown: it takes
// every event queued, handles the session ones, and applies the newest
// snapshot once.
func (s *Server) metadataLoop() {
	defer s.bgWG.Done()
	for {
		var last *coord.Snapshot
		select {
		case <-s.closed:
			return
		case ev, ok := <-s.sub.Events():
			if !ok {
				return
			}
			s.sessionEvent(ev)
			last = ev.Snapshot
		}
		for more := true; more; {
			select {
			case ev, ok := <-s.sub.Events():
				if !ok {
					s.applySnapshot(last)
					return
				}
				s.sessionEvent(ev)
				last = ev.Snapshot
			default:
				more = false
			}
		}
		s.applySnapshot(last)
	}
}

// sessionEvent handles the events about the broker's session with the
// coordinator. The outage itself is logged by the coordinator, once.
func (s *Server) sessionEvent(ev coord.Event) {
	switch ev.Kind {
	case coord.EventDisconnected:
		s.coordLostAt.Store(s.nowFn().UnixNano()) // readiness (health.go)
	case coord.EventReconnected:
		s.coordLostAt.Store(0)
	}
	switch ev.Kind {
	case coord.EventSessionExpired:
		s.coordLostAt.Store(0)
		s.log.Warn("coordination session had expired; the broker is registered again and its metadata reloaded")
		s.dirs.reportAgain() // the reports lived in the old session
	case coord.EventRegistrationLost:
		err := fmt.Errorf("broker: registration lost after a ZooKeeper session expiry: %w", ev.Err)
		s.log.Error("stopping: the broker could not register again", "err", ev.Err)
		select {
		case s.fatal <- err:
		default:
		}
	}
}

// startController runs a controller candidate in this broker: it
// campaigns, and while elected keeps every partition's leadership right.
func (s *Server) startController() {
	ctx, cancel := context.WithCancel(context.Background())
	s.ctrlCancel, s.ctrlDone = cancel, make(chan struct{})
	cfg := coord.ControllerConfig{
		BrokerID:              s.cfg.BrokerID,
		AutoLeaderRebalance:   s.cfg.AutoLeaderRebalance,
		UncleanLeaderElection: s.cfg.TopicDefaults[coord.UncleanConfig] == "true",
		Logger:                s.log.With("component", "controller"),
		OnActive:              s.controllerActive.Store,
	}
	go func() {
		defer close(s.ctrlDone)
		if err := coord.RunController(ctx, s.coord, cfg); err != nil && !errors.Is(err, coord.ErrClosed) {
			s.log.Error("controller stopped", "err", err)
		}
	}()
}

// controlledShutdown asks the controller to move this broker's leadership
// to other in-sync replicas and waits for the answer (bounded). Alone in
// the cluster there is nobody to move it to, and nothing is asked.
func (s *Server) controlledShutdown(ctx context.Context) {
	snap := s.coord.Snapshot()
	others := 0
	for _, b := range snap.Brokers {
		if b.ID != s.cfg.BrokerID {
			others++
		}
	}
	if others == 0 {
		return
	}
	led := len(snap.LedBy(s.cfg.BrokerID))
	ctx, cancel := context.WithTimeout(ctx, controlledShutdownTimeout)
	defer cancel()
	start := s.nowFn()
	remaining, err := s.coord.ControlledShutdown(ctx, s.cfg.BrokerID)
	if err != nil {
		s.log.Warn("controlled shutdown failed; leadership moves when the registration goes", "err", err)
		return
	}
	s.applySnapshot(s.coord.Snapshot())
	s.log.Info("controlled shutdown: leadership moved", "led", led, "still_leads", len(remaining),
		"elapsed", s.nowFn().Sub(start).Round(time.Millisecond).String())
	if len(remaining) > 0 {
		s.log.Warn("controlled shutdown: no other in-sync replica can lead these partitions", "partitions", fmt.Sprint(remaining))
	}
}

// leaveCluster removes the broker's registration, so the other brokers
// see it leave at once rather than a session timeout later. The
// controller candidate was stopped before (stopBackground), resigning the
// role if it held it.
func (s *Server) leaveCluster() {
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	if err := s.coord.Deregister(ctx); err != nil && !errors.Is(err, coord.ErrClosed) {
		s.log.Warn("deregistering failed; the registration goes with the session", "err", err)
	}
}

// brokerBlockSource makes producer ids unique across the brokers of a
// cluster without a shared allocator: broker b hands out ids
// b·2^32 + n, where n comes from its own file-backed source. Broker 0's
// ids are the source's own, so a single node keeps its ids.
type brokerBlockSource struct {
	src    producer.BlockSource
	broker int32
}

// idsPerBroker is the size of each broker's producer id range.
const idsPerBroker = int64(1) << 32

// errProducerIDsExhausted is returned when a broker has used its range.
var errProducerIDsExhausted = errors.New("broker: this broker's producer id range is used up")

// Reserve implements producer.BlockSource.
func (b brokerBlockSource) Reserve() (producer.Block, error) {
	blk, err := b.src.Reserve()
	if err != nil {
		return blk, err
	}
	if blk.Start >= idsPerBroker {
		return producer.Block{}, errProducerIDsExhausted
	}
	base := int64(b.broker) * idsPerBroker
	return producer.Block{Start: base + blk.Start, End: base + min(blk.End, idsPerBroker)}, nil
}
