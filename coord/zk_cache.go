package coord

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkCache is the metadata cache of a ZK coordinator. Its state is owned by
// one goroutine (loop): it handles session events, fired watches and
// requests from the coordinator's methods one at a time, re-arms each
// watch as it reads, and publishes a new Snapshot after every change.
//
// Watches: brokers/ids (children) and each broker (data); controller
// (exists); topics (children), each topic (data) and each partition state
// (data); admin/delete_topics (children); admin/controller_requests
// (children). armed records which are set, so a reload never sets a
// second watch on a path. A read that fails (ZooKeeper unreachable), on a
// fired watch or in a request, sets needFull: once the session is back,
// everything is read again, every fullReloadRetry until a reload succeeds.
type zkCache struct {
	z        *ZK
	requests chan loopRequest
	fired    chan firedWatch
	armed    map[watchKey]uint64 // watch set on the path, by generation
	gen      uint64

	connected  bool
	sessionID  int64
	needFull   bool
	outageFrom time.Time

	brokers    map[int32]BrokerInfo
	controller ControllerInfo
	topics     map[string]*TopicInfo // immutable values, replaced on change
	pending    map[string]TopicID
}

type loopRequest struct {
	fn    func(c *zkCache) error
	reply chan error
}

type watchKind byte

const (
	watchData     watchKind = 'd'
	watchChildren watchKind = 'c'
	watchExists   watchKind = 'e'
)

type watchKey struct {
	path string
	kind watchKind
}

type firedWatch struct {
	key watchKey
	gen uint64
	ev  zk.Event
}

// fullReloadRetry is how often the loop tries a full reload again while
// one is needed and the session is up.
const fullReloadRetry = 250 * time.Millisecond

func newZKCache(z *ZK) *zkCache {
	return &zkCache{
		z: z, requests: make(chan loopRequest), fired: make(chan firedWatch, 64),
		armed: map[watchKey]uint64{}, connected: true, sessionID: z.conn.SessionID(),
		brokers: map[int32]BrokerInfo{}, controller: ControllerInfo{ID: NoLeader},
		topics: map[string]*TopicInfo{}, pending: map[string]TopicID{},
	}
}

func (c *zkCache) loop() {
	defer close(c.z.loopDone)
	retry := time.NewTicker(fullReloadRetry)
	defer retry.Stop()
	for {
		select {
		case <-c.z.closing:
			return
		case <-c.z.sessionEvents.signal:
			for _, ev := range c.z.sessionEvents.drain() {
				c.session(ev)
			}
		case f := <-c.fired:
			if c.armed[f.key] != f.gen {
				continue // a watch of an expired session, already replaced
			}
			delete(c.armed, f.key)
			if f.ev.Type == zk.EventNotWatching {
				c.needFull = true // session expired or closing
				continue
			}
			if err := c.handle(f.key); err != nil {
				c.needFull = true
			}
			c.publish()
		case r := <-c.requests:
			err := r.fn(c)
			if err != nil {
				// The read may have stopped half-way, leaving a watch
				// unset: only a full reload is sure to mend that.
				c.needFull = true
			}
			c.publish()
			r.reply <- err
		case <-retry.C:
			if c.needFull && c.connected {
				if err := c.fullReload(); err == nil {
					c.publish(Event{Kind: EventRequests})
				}
			}
		}
	}
}

// session handles a session state change.
func (c *zkCache) session(ev zk.Event) {
	z := c.z
	switch ev.State {
	case zk.StateHasSession:
		if c.connected {
			return
		}
		sid := z.conn.SessionID()
		c.connected = true
		out := time.Since(c.outageFrom).Round(time.Millisecond)
		if sid == c.sessionID {
			z.log.Info("coord: ZooKeeper connection restored, same session", "outage", out.String())
			c.reloadAfterOutage()
			c.publish(Event{Kind: EventReconnected}, Event{Kind: EventRequests})
			return
		}
		c.sessionID = sid
		clear(c.armed) // the old session's watches are gone with it
		z.log.Warn("coord: ZooKeeper session had expired; new session established", "outage", out.String(), "session", fmt.Sprintf("0x%x", sid))
		c.endLeadership()
		c.needFull = true
		regErr := z.renewRegistration()
		c.reloadAfterOutage()
		evs := []Event{{Kind: EventSessionExpired}, {Kind: EventRequests}}
		if regErr != nil {
			z.log.Error("coord: could not register the broker again after session expiry", "err", regErr)
			evs = append(evs, Event{Kind: EventRegistrationLost, Err: regErr})
		}
		c.publish(evs...)
	case zk.StateExpired:
		c.endLeadership()
		fallthrough
	case zk.StateDisconnected, zk.StateConnecting:
		if !c.connected {
			return
		}
		c.connected = false
		c.outageFrom = time.Now()
		cause := fmt.Sprintf("%v", z.lastLog.Load())
		z.log.Warn("coord: ZooKeeper unreachable; serving the last known metadata, writes fail until it is back",
			"state", ev.State.String(), "cause", cause)
		c.publish(Event{Kind: EventDisconnected, Err: fmt.Errorf("%w: ZooKeeper %s (%s)", ErrUnavailable, ev.State, cause)})
	}
}

// reloadAfterOutage reads everything again once the session is back. A
// failed reload leaves needFull set (fullReload sets it), so the loop
// tries again every fullReloadRetry; until then the cache serves what it
// held before the outage.
func (c *zkCache) reloadAfterOutage() {
	if err := c.fullReload(); err != nil {
		c.z.log.Warn("coord: metadata reload after the ZooKeeper outage failed; the cache loop retries it",
			"retry_every", fullReloadRetry.String(), "err", err)
	}
}

func (c *zkCache) endLeadership() {
	z := c.z
	z.mu.Lock()
	if z.mu.lead != nil {
		z.mu.lead.end()
		z.mu.lead = nil
	}
	z.mu.Unlock()
}

// publish builds a snapshot from the cache and publishes it.
func (c *zkCache) publish(extra ...Event) {
	s := emptySnapshot(c.z.clusterID)
	s.Connected = c.connected
	for _, b := range c.brokers {
		s.Brokers = append(s.Brokers, b)
	}
	slices.SortFunc(s.Brokers, func(a, b BrokerInfo) int { return int(a.ID) - int(b.ID) })
	s.Controller = c.controller
	for name, t := range c.topics {
		if _, p := c.pending[name]; !p {
			s.Topics[name] = t
		}
	}
	for name, id := range c.pending {
		s.PendingDeletion[name] = id
	}
	c.z.hub.publish(s, extra...)
}

// arm forwards the watch's event to the loop.
func (c *zkCache) arm(key watchKey, ch <-chan zk.Event) {
	c.gen++
	gen := c.gen
	c.armed[key] = gen
	go func() {
		ev, ok := <-ch
		if !ok {
			ev = zk.Event{Type: zk.EventNotWatching}
		}
		select {
		case c.fired <- firedWatch{key, gen, ev}:
		case <-c.z.closing:
		}
	}()
}

// watchedRead runs read, one read of key.path, through ZK.call (op names
// it), asking read to set a watch of key's kind unless one is set, and
// arms the watch read set. So a path never has two watches of one kind.
func (c *zkCache) watchedRead(key watchKey, op string, read func(watch bool) (<-chan zk.Event, error)) error {
	_, armed := c.armed[key]
	watch := !armed
	var ch <-chan zk.Event
	err := c.z.call(bg, op, key.path, func() (err error) {
		ch, err = read(watch)
		return err
	})
	if err == nil && watch {
		c.arm(key, ch)
	}
	return err
}

// get reads a znode's data, setting a data watch unless one is set.
func (c *zkCache) get(path string) ([]byte, *zk.Stat, error) {
	var data []byte
	var stat *zk.Stat
	err := c.watchedRead(watchKey{path, watchData}, "get", func(watch bool) (ch <-chan zk.Event, err error) {
		if watch {
			data, stat, ch, err = c.z.conn.GetW(path)
		} else {
			data, stat, err = c.z.conn.Get(path)
		}
		return ch, err
	})
	return data, stat, err
}

// children lists a znode's children, setting a child watch unless one is
// set.
func (c *zkCache) children(path string) ([]string, error) {
	var kids []string
	err := c.watchedRead(watchKey{path, watchChildren}, "children", func(watch bool) (ch <-chan zk.Event, err error) {
		if watch {
			kids, _, ch, err = c.z.conn.ChildrenW(path)
		} else {
			kids, _, err = c.z.conn.Children(path)
		}
		return ch, err
	})
	return kids, err
}

// exists checks a znode, setting an exists watch (fires on creation,
// deletion and data change) unless one is set.
func (c *zkCache) exists(path string) (bool, error) {
	var ok bool
	err := c.watchedRead(watchKey{path, watchExists}, "exists", func(watch bool) (ch <-chan zk.Event, err error) {
		if watch {
			ok, _, ch, err = c.z.conn.ExistsW(path)
		} else {
			ok, _, err = c.z.conn.Exists(path)
		}
		return ch, err
	})
	return ok, err
}

// handle re-reads what a fired watch is about.
func (c *zkCache) handle(key watchKey) error {
	z := c.z
	rel := strings.TrimPrefix(key.path, z.root+"/")
	parts := strings.Split(rel, "/")
	switch {
	case rel == zBrokerIDs:
		return c.loadBrokers()
	case len(parts) == 3 && parts[0] == "brokers" && parts[1] == "ids":
		id, err := strconv.Atoi(parts[2])
		if err != nil {
			return nil
		}
		return c.loadBroker(int32(id))
	case rel == zController:
		return c.loadController()
	case rel == zTopics:
		return c.loadTopics()
	case len(parts) == 2 && parts[0] == zTopics:
		return c.loadTopic(parts[1], false)
	case len(parts) == 5 && parts[0] == zTopics && parts[2] == "partitions" && parts[4] == "state":
		n, err := strconv.Atoi(parts[3])
		if err != nil {
			return nil
		}
		return c.loadState(parts[1], int32(n))
	case rel == zDeleteTopics:
		return c.loadPending()
	case rel == zRequests:
		if _, err := c.children(key.path); err != nil {
			return err
		}
		c.publish(Event{Kind: EventRequests})
	}
	return nil
}

// fullReload reads everything the cache holds, setting missing watches.
// Partition states are read again too: after a session expiry their
// watches are gone, and they may have changed meanwhile.
func (c *zkCache) fullReload() error {
	loadTopics := func() error { return c.loadTopicList(true) }
	for _, load := range []func() error{c.loadBrokers, c.loadController, loadTopics, c.loadPending} {
		if err := load(); err != nil {
			c.needFull = true
			return err
		}
	}
	if _, err := c.children(c.z.path(zRequests)); err != nil {
		c.needFull = true
		return err
	}
	c.needFull = false
	return nil
}

func (c *zkCache) loadBrokers() error {
	kids, err := c.children(c.z.path(zBrokerIDs))
	if err != nil {
		return err
	}
	seen := map[int32]bool{}
	for _, k := range kids {
		id, err := strconv.Atoi(k)
		if err != nil {
			continue
		}
		seen[int32(id)] = true
		if err := c.loadBroker(int32(id)); err != nil {
			return err
		}
	}
	for id := range c.brokers {
		if !seen[id] {
			delete(c.brokers, id)
		}
	}
	return nil
}

func (c *zkCache) loadBroker(id int32) error {
	p := c.z.path(zBroker(id))
	data, stat, err := c.get(p)
	if errors.Is(err, zk.ErrNoNode) {
		delete(c.brokers, id)
		return nil
	}
	if err != nil {
		return err
	}
	var d zBrokerData
	if err := decodeZ(p, data, &d); err != nil {
		c.z.log.Error("coord: ignoring broker registration", "err", err)
		delete(c.brokers, id)
		return nil
	}
	eps, err := d.decodeEndpoints()
	if err != nil {
		c.z.log.Error("coord: ignoring broker registration", "path", p, "err", err)
		delete(c.brokers, id)
		return nil
	}
	c.brokers[id] = BrokerInfo{ID: id, Host: d.Host, Port: d.Port, Endpoints: eps, ReplicationPort: d.ReplicationPort, Rack: d.Rack, Epoch: stat.Czxid}
	return nil
}

func (c *zkCache) loadController() error {
	p := c.z.path(zController)
	ok, err := c.exists(p)
	if err != nil {
		return err
	}
	if !ok {
		c.controller = ControllerInfo{ID: NoLeader}
		return nil
	}
	var data []byte
	err = c.z.call(bg, "get", p, func() (err error) {
		data, _, err = c.z.conn.Get(p)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		c.controller = ControllerInfo{ID: NoLeader}
		return nil
	}
	if err != nil {
		return err
	}
	var d zControllerData
	if err := decodeZ(p, data, &d); err != nil {
		return err
	}
	c.controller = ControllerInfo{ID: d.BrokerID, Epoch: d.Epoch}
	c.z.mu.Lock()
	if l := c.z.mu.lead; l != nil && d.Epoch > l.epoch {
		l.end()
		c.z.mu.lead = nil
	}
	c.z.mu.Unlock()
	return nil
}

func (c *zkCache) loadTopics() error { return c.loadTopicList(false) }

// loadTopicList reads the topic list and each topic; with all, every
// partition state as well (see loadTopic).
func (c *zkCache) loadTopicList(all bool) error {
	kids, err := c.children(c.z.path(zTopics))
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, name := range kids {
		seen[name] = true
		if err := c.loadTopic(name, all); err != nil {
			return err
		}
	}
	for name := range c.topics {
		if !seen[name] {
			delete(c.topics, name)
		}
	}
	return nil
}

// loadTopic reads a topic and the states of its partitions the cache does
// not hold yet (or all of them with all, or if the topic ID changed).
func (c *zkCache) loadTopic(name string, all bool) error {
	p := c.z.path(zTopic(name))
	data, _, err := c.get(p)
	if errors.Is(err, zk.ErrNoNode) {
		delete(c.topics, name)
		return nil
	}
	if err != nil {
		return err
	}
	var d zTopicData
	if err := decodeZ(p, data, &d); err != nil {
		c.z.log.Error("coord: ignoring topic", "topic", name, "err", err)
		return nil
	}
	asg, err := d.assignment(p)
	if err != nil {
		c.z.log.Error("coord: ignoring topic", "topic", name, "err", err)
		return nil
	}
	old := c.topics[name]
	t := &TopicInfo{Name: name, ID: d.ID, Configs: d.Configs, Partitions: make([]PartitionInfo, len(asg))}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	reuse := old != nil && old.ID == d.ID && !all
	for i, pi := range d.partitionInfos(asg) {
		if reuse && i < len(old.Partitions) {
			t.Partitions[i] = old.Partitions[i]
			t.Partitions[i].Replicas, t.Partitions[i].Adding, t.Partitions[i].Removing = pi.Replicas, pi.Adding, pi.Removing
			continue
		}
		pi.State, pi.Version = PartitionState{Leader: NoLeader}, -1
		t.Partitions[i] = pi
	}
	c.topics[name] = t
	for i := range asg {
		if reuse && i < len(old.Partitions) {
			continue
		}
		if err := c.loadState(name, int32(i)); err != nil {
			return err
		}
	}
	return nil
}

func (c *zkCache) loadState(name string, n int32) error {
	t, ok := c.topics[name]
	if !ok || int(n) >= len(t.Partitions) {
		return nil // the topic went away
	}
	p := c.z.path(zState(name, n))
	data, stat, err := c.get(p)
	pi := t.Partitions[n]
	switch {
	case errors.Is(err, zk.ErrNoNode):
		// Not created yet (or being deleted): watch for it.
		if _, err := c.exists(p); err != nil {
			return err
		}
		pi.State, pi.Version = PartitionState{Leader: NoLeader}, -1
	case err != nil:
		return err
	default:
		var d zStateData
		if err := decodeZ(p, data, &d); err != nil {
			c.z.log.Error("coord: ignoring partition state", "err", err)
			return nil
		}
		pi.State, pi.Version = d.PartitionState, stat.Version
	}
	nt := *t
	nt.Partitions = slices.Clone(t.Partitions)
	nt.Partitions[n] = pi
	c.topics[name] = &nt
	return nil
}

func (c *zkCache) loadPending() error {
	kids, err := c.children(c.z.path(zDeleteTopics))
	if err != nil {
		return err
	}
	next := map[string]TopicID{}
	for _, name := range kids {
		if id, ok := c.pending[name]; ok {
			next[name] = id
			continue
		}
		p := c.z.path(zDeleteMarker(name))
		var data []byte
		err := c.z.call(bg, "get", p, func() (err error) {
			data, _, err = c.z.conn.Get(p)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		var d zDeleteMarkerData
		if err := decodeZ(p, data, &d); err != nil {
			c.z.log.Error("coord: bad deletion marker", "err", err)
		}
		next[name] = d.TopicID
	}
	c.pending = next
	return nil
}
