package broker

import (
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
)

// coordinatorLoader loads into a coordinator (consumer groups, transactions)
// the partitions of its internal topic (__consumer_offsets,
// __transaction_state) that this broker leads, and unloads those it stops
// leading. One goroutine (run) does it, so Load and Unload of a partition
// never overlap; loads of several partitions run in parallel. A partition
// that failed to load is tried again every second.
//
// Partitions are wanted at a leader epoch. With reloadOnEpoch a partition
// led at a new epoch is unloaded and loaded again (the transaction
// coordinator's epoch is the leader epoch, as Kafka's); without it the
// epoch is ignored (Kafka's group coordinator keeps what it loaded).
type coordinatorLoader struct {
	s             *Server
	topic         string // the internal topic, for logs
	what          string // what is loaded, for logs: "consumer groups"
	reloadOnEpoch bool
	// numPartitions is the coordinator's partition count; 0 when there
	// is no coordinator (yet).
	numPartitions func() int
	// load loads partition p, led at epoch, from this broker's replica
	// of it in t.
	load func(t *topicState, lp *partition, p int, epoch int32) error
	// unload drops partition p from the coordinator.
	unload func(p int)

	wake chan struct{} // buffered, 1

	mu struct {
		sync.Mutex
		want   map[int]int32 // led by this broker at an epoch, as last applied
		loaded map[int]int32 // loaded into the coordinator
		errs   map[int]error // failed to load, until the next attempt
	}
}

func (g *coordinatorLoader) init() {
	g.wake = make(chan struct{}, 1)
	g.mu.want = map[int]int32{}
	g.mu.loaded = map[int]int32{}
	g.mu.errs = map[int]error{}
}

// want records the partitions this broker leads, at their leader epochs,
// and wakes the loader.
func (g *coordinatorLoader) want(led map[int]int32) {
	g.mu.Lock()
	g.mu.want = led
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// loadErr is why partition p failed to load, or nil.
func (g *coordinatorLoader) loadErr(p int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.errs[p]
}

// isLoaded reports whether partition p is loaded.
func (g *coordinatorLoader) isLoaded(p int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.mu.loaded[p]
	return ok
}

// run loads and unloads until the server shuts down.
func (g *coordinatorLoader) run() {
	defer g.s.bgWG.Done()
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case <-g.s.closed:
			return
		case <-g.wake:
			g.sync()
		case <-retry.C:
			g.mu.Lock()
			failed := len(g.mu.errs) > 0
			g.mu.Unlock()
			if failed {
				g.sync()
			}
		}
	}
}

// stale reports whether a partition loaded at epoch loaded must be loaded
// again to serve at epoch want.
func (g *coordinatorLoader) stale(loaded, want int32) bool {
	return g.reloadOnEpoch && loaded != want
}

// sync makes the loaded partitions the wanted ones.
func (g *coordinatorLoader) sync() {
	s := g.s
	n := g.numPartitions()
	if n == 0 {
		return
	}
	g.mu.Lock()
	want := g.mu.want
	var unload []int
	load := map[int]int32{}
	for p, e := range g.mu.loaded {
		if we, ok := want[p]; !ok || g.stale(e, we) {
			unload = append(unload, p)
		}
	}
	for p, e := range want {
		if le, ok := g.mu.loaded[p]; (!ok || g.stale(le, e)) && p < n {
			load[p] = e
		}
	}
	g.mu.Unlock()

	for _, p := range unload {
		g.unload(p)
		s.log.Info(g.what+" unloaded: leadership moved away", "topic", g.topic, "partition", p)
		g.mu.Lock()
		delete(g.mu.loaded, p)
		g.mu.Unlock()
	}
	if len(load) == 0 {
		return
	}
	t := s.topic(g.topic)
	if t == nil {
		t = &topicState{}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for p, epoch := range load {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := errors.New("this broker has no open replica of the partition")
			if lp := t.local(int32(p)); lp != nil {
				err = g.load(t, lp, p, epoch)
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			if err != nil {
				s.log.Error("loading "+g.what+" failed; their coordinator is unavailable", "topic", g.topic, "partition", p, "err", err)
				g.mu.errs[p] = err
				return
			}
			delete(g.mu.errs, p)
			g.mu.loaded[p] = epoch
		}()
	}
	wg.Wait()
}

// noteLeadership hands the loader the partitions of its topic this broker
// leads in snap, at their leader epochs.
func (g *coordinatorLoader) noteLeadership(snap *coord.Snapshot) {
	t, ok := snap.Topic(g.topic)
	if !ok {
		return
	}
	led := map[int]int32{}
	for i, p := range t.Partitions {
		if p.State.Leader == g.s.cfg.BrokerID {
			led[i] = p.State.LeaderEpoch
		}
	}
	g.want(led)
}

// coordinatorOf is the broker that coordinates the ids of partition p of
// the internal topic t: the partition's live leader, once loaded there
// when that is this broker. COORDINATOR_NOT_AVAILABLE when the topic's
// partition count is not the coordinator's (the topic decides, at the
// next start), the partition has no live leader, or it failed to load.
func (g *coordinatorLoader) coordinatorOf(t *coord.TopicInfo, p int) (coord.BrokerInfo, error) {
	s, n := g.s, g.numPartitions()
	if len(t.Partitions) != n {
		s.log.Error("the "+g.what+" coordinator was started with another partition count than the cluster's topic has; restart the broker",
			"topic", g.topic, "partitions", len(t.Partitions), "coordinator_partitions", n)
		return coord.BrokerInfo{}, newKafkaError(kerr.CoordinatorNotAvailable, "%s has %d partitions, this broker's coordinator %d", g.topic, len(t.Partitions), n)
	}
	leader := t.Partitions[p].State.Leader
	b, ok := s.coord.Snapshot().Broker(leader)
	if !ok {
		return coord.BrokerInfo{}, newKafkaError(kerr.CoordinatorNotAvailable, "partition %d of %s has no live leader", p, g.topic)
	}
	if leader == s.cfg.BrokerID {
		if err := g.loadErr(p); err != nil {
			return coord.BrokerInfo{}, newKafkaError(kerr.CoordinatorNotAvailable, "partition %d of %s failed to load", p, g.topic)
		}
	}
	return b, nil
}
