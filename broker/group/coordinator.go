package group

import (
	"context"
	"errors"
	"sort"
	"sync"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Topic is the internal topic that holds committed offsets and group
// metadata.
const Topic = "__consumer_offsets"

// Errors returned by Load.
var (
	ErrClosed        = errors.New("group: coordinator closed")
	ErrAlreadyLoaded = errors.New("group: partition already loaded")
	ErrBadPartition  = errors.New("group: partition out of range")
)

// Coordinator is the classic group coordinator for the partitions of
// __consumer_offsets loaded into it. Its request methods are safe for
// concurrent use; each may block (see doc.go) until ctx is done.
type Coordinator struct {
	cfg Config

	mu struct {
		sync.Mutex
		closed     bool
		partitions map[int]*partition // loading or loaded
		groups     map[string]*group  // the groups of loaded partitions
		// txnProducers lists, per producer id, the groups holding
		// transactional offsets of it that wait for its marker.
		txnProducers map[int64]map[*group]struct{}
	}

	stopSweep chan struct{}
	sweepDone chan struct{}
}

// partition is one partition of __consumer_offsets owned by the
// coordinator. Its fields are guarded by Coordinator.mu until loading is
// false; then they no longer change.
type partition struct {
	id      int
	loading bool        // requests get COORDINATOR_LOAD_IN_PROGRESS
	w       *writer     // set by Load once the log is replayed
	markers []txnMarker // arrived while loading; Load applies them
}

// New returns a coordinator that owns no partition yet: every group
// request answers NOT_COORDINATOR until Load has loaded the group's
// partition.
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, stopSweep: make(chan struct{}), sweepDone: make(chan struct{})}
	c.mu.partitions = make(map[int]*partition)
	c.mu.groups = make(map[string]*group)
	c.mu.txnProducers = make(map[int64]map[*group]struct{})
	go c.sweepLoop()
	return c, nil
}

// PartitionFor returns the partition of __consumer_offsets that holds the
// group, as Kafka computes it: abs(Java String.hashCode(group)) % n, so
// that FindCoordinator answers as a Kafka cluster would.
func PartitionFor(group string, n int) int {
	var h int32
	for _, u := range utf16.Encode([]rune(group)) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 { // Kafka's Utils.abs
		h = 0
	} else if h < 0 {
		h = -h
	}
	return int(h) % n
}

// PartitionFor returns the partition of __consumer_offsets that holds the
// group under this coordinator's NumPartitions.
func (c *Coordinator) PartitionFor(group string) int { return PartitionFor(group, c.cfg.NumPartitions) }

// NumPartitions is the configured partition count of __consumer_offsets.
func (c *Coordinator) NumPartitions() int { return c.cfg.NumPartitions }

// Client tells the coordinator who sent a request. The server attaches it
// to each request's context with WithClient; it names new members
// ("<client.id>-<uuid>") and shows in DescribeGroups.
type Client struct {
	ID   string // the request header's client.id
	Host string // the peer as Kafka shows it: "/" + IP address
}

type clientKey struct{}

// WithClient returns ctx carrying the client that sent the request.
func WithClient(ctx context.Context, cl Client) context.Context {
	return context.WithValue(ctx, clientKey{}, cl)
}

// ClientFrom returns the client WithClient put in ctx (zero if none).
func ClientFrom(ctx context.Context) Client { return clientFrom(ctx) }

func clientFrom(ctx context.Context) Client {
	cl, _ := ctx.Value(clientKey{}).(Client)
	return cl
}

// lookup finds the group, creating it (Empty) when create is set and it
// does not exist. It returns a Kafka error code when the coordinator cannot
// serve the group: COORDINATOR_NOT_AVAILABLE after Close, NOT_COORDINATOR
// for a partition it does not own, COORDINATOR_LOAD_IN_PROGRESS while the
// partition loads. A nil group with code 0 means "no such group".
func (c *Coordinator) lookup(id string, create bool) (*group, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.statusLocked(id); code != 0 {
		return nil, code
	}
	g := c.mu.groups[id]
	if g == nil && create {
		p := c.mu.partitions[c.PartitionFor(id)]
		g = newGroup(c, id, p)
		c.mu.groups[id] = g
	}
	return g, 0
}

// memberGroup is lookup for a request of a group member (JoinGroup,
// SyncGroup, Heartbeat): a group the coordinator does not hold answers
// UNKNOWN_MEMBER_ID.
func (c *Coordinator) memberGroup(id string, create bool) (*group, int16) {
	g, code := c.lookup(id, create)
	if code == 0 && g == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	return g, code
}

func (c *Coordinator) statusLocked(id string) int16 {
	if c.mu.closed {
		return kerr.CoordinatorNotAvailable.Code
	}
	p := c.mu.partitions[c.PartitionFor(id)]
	switch {
	case p == nil:
		return kerr.NotCoordinator.Code
	case p.loading:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// forget removes g from the group map if it is still the one registered
// under its id. The caller holds g.mu (lock order: group, then coordinator).
func (c *Coordinator) forget(g *group) {
	c.mu.Lock()
	if c.mu.groups[g.id] == g {
		delete(c.mu.groups, g.id)
	}
	for pid := range g.txnOffsets {
		c.removeTxnProducerLocked(pid, g)
	}
	c.mu.Unlock()
}

// groupsSorted returns the registered groups ordered by id.
func (c *Coordinator) groupsSorted() []*group {
	c.mu.Lock()
	gs := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	sort.Slice(gs, func(i, j int) bool { return gs[i].id < gs[j].id })
	return gs
}

// Unload gives up a partition (its leadership moved away): its groups are
// dropped from memory, members waiting in JoinGroup or SyncGroup are
// answered NOT_COORDINATOR, and Unload returns once the writes already
// queued for the partition are appended. Clients find the new coordinator
// and carry on from what the log holds. Unloading a partition that is not
// loaded does nothing.
func (c *Coordinator) Unload(partitionID int) {
	c.mu.Lock()
	p := c.mu.partitions[partitionID]
	if p == nil || p.loading {
		c.mu.Unlock()
		return
	}
	delete(c.mu.partitions, partitionID)
	var gs []*group
	for id, g := range c.mu.groups {
		if g.part == p {
			gs = append(gs, g)
			delete(c.mu.groups, id)
		}
	}
	c.forgetTxnProducersLocked(func(g *group) bool { return g.part == p })
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		g.killLocked(kerr.NotCoordinator.Code)
		g.mu.Unlock()
	}
	p.w.close()
}

// closedNow reports whether Close has run.
func (c *Coordinator) closedNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.closed
}

// Close stops the coordinator: members waiting in JoinGroup or SyncGroup
// are answered COORDINATOR_NOT_AVAILABLE, every later request gets the
// same, and Close returns once every queued write is appended. It does not
// close the logs; the server does that after Close returns.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	var ws []*writer
	for _, p := range c.mu.partitions {
		if p.w != nil { // nil early in Load, which then closes its own writer
			ws = append(ws, p.w)
		}
	}
	gs := c.mu.groups
	c.mu.partitions = make(map[int]*partition)
	c.mu.groups = make(map[string]*group)
	c.mu.txnProducers = make(map[int64]map[*group]struct{})
	c.mu.Unlock()

	close(c.stopSweep)
	<-c.sweepDone
	for _, g := range gs {
		g.mu.Lock()
		g.killLocked(kerr.CoordinatorNotAvailable.Code)
		g.mu.Unlock()
	}
	for _, w := range ws {
		w.close()
	}
	return nil
}

// validGroupID reports whether id may name a group in a request of the
// given kind: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and OffsetDelete
// need a non-empty id; OffsetCommit, OffsetFetch, DescribeGroups and
// DeleteGroups accept "" as Kafka does. No id may exceed what the record
// format stores.
func validGroupID(id string, allowEmpty bool) bool {
	return (allowEmpty || id != "") && len(id) <= maxStringLen
}
