package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// bg is the context of the cache's reads: they are bounded by the
// ZooKeeper client's own timeouts.
var bg = context.Background()

// DefaultChroot is the chroot used when zookeeper.connect names none.
const DefaultChroot = "/strata"

// ZK is the ZooKeeper Coordinator: one ZooKeeper session (go-zookeeper),
// the znodes under the chroot laid out as doc.go shows, and a cache of
// them kept current by watches in one goroutine (zk_cache.go).
type ZK struct {
	cfg       Config
	log       *slog.Logger
	conn      *zk.Conn
	root      string // chroot without trailing slash; "" for /
	clusterID string
	hub       *hub
	cache     *zkCache
	configs   *zkConfigs  // entity configs, SCRAM credentials among them (zk_config.go)
	features  *zkFeatures // finalized features (zk_features.go)
	tokens    *zkTokens   // delegation tokens (zk_tokens.go)
	acls      *zkACLs     // zk_acls.go

	// hookAfterMarker, if set, runs in DeleteTopic after the marker is
	// created; an error stops the deletion there (crash tests).
	hookAfterMarker func() error
	// registerGrace is defaultRegisterGrace; tests that wait for a real
	// session expiry lengthen it.
	registerGrace time.Duration

	sessionEvents *eventQueue   // from go-zookeeper's callback
	closing       chan struct{} // closed by Close
	loopDone      chan struct{}
	lastLog       atomic.Value // string: go-zookeeper's last log line

	mu struct {
		sync.Mutex
		reg    *BrokerInfo // what Register registered, renewed after expiry
		lead   *zkLeadership
		closed bool
	}
}

var _ Coordinator = (*ZK)(nil)

// ParseConnect splits a zookeeper.connect string into its servers and
// chroot: "h1:2181,h2:2181/strata" gives [h1:2181 h2:2181] and "/strata".
// With no chroot the chroot is DefaultChroot; "/" means the root.
func ParseConnect(s string) (servers []string, chroot string, err error) {
	hosts := s
	chroot = DefaultChroot
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hosts, chroot = s[:i], s[i:]
		if chroot != "/" {
			chroot = strings.TrimRight(chroot, "/")
		}
		if strings.Contains(chroot, "//") {
			return nil, "", fmt.Errorf("coord: zookeeper.connect %q: bad chroot %q", s, chroot)
		}
	}
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "2181")
		}
		servers = append(servers, h)
	}
	if len(servers) == 0 {
		return nil, "", fmt.Errorf("coord: zookeeper.connect %q names no server", s)
	}
	return servers, chroot, nil
}

// DialZK connects to ZooKeeper as cfg.ZooKeeperConnect says, waits for the
// session (up to cfg.ConnectTimeout, else ErrUnavailable), creates the
// chroot and the base znodes if missing, reads or creates the cluster ID
// and loads the cache.
func DialZK(ctx context.Context, cfg Config) (*ZK, error) {
	cfg.defaults()
	servers, chroot, err := ParseConnect(cfg.ZooKeeperConnect)
	if err != nil {
		return nil, err
	}
	z := &ZK{
		cfg: cfg, log: cfg.Logger, root: strings.TrimRight(chroot, "/"), registerGrace: defaultRegisterGrace,
		sessionEvents: newEventQueue(), closing: make(chan struct{}), loopDone: make(chan struct{}),
	}
	z.lastLog.Store("")
	conn, _, err := zk.Connect(servers, cfg.SessionTimeout,
		zk.WithLogger(zkLogger{z}), zk.WithLogInfo(false),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession {
				z.sessionEvents.push(ev)
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("coord: zookeeper.connect %q: %w", cfg.ZooKeeperConnect, err)
	}
	z.conn = conn
	fail := func(err error) (*ZK, error) {
		conn.Close()
		return nil, err
	}
	if err := z.waitSession(ctx, cfg.ConnectTimeout); err != nil {
		return fail(err)
	}
	// The events of establishing this first session are not news: the
	// cache would take the initial StateConnecting for an outage.
	z.sessionEvents.dropThroughSession()
	if err := z.ensureBase(ctx, chroot); err != nil {
		return fail(err)
	}
	if z.clusterID, err = z.loadClusterID(ctx); err != nil {
		return fail(err)
	}
	z.hub = newHub(emptySnapshot(z.clusterID))
	z.cache = newZKCache(z)
	go z.cache.loop()
	if err := z.inLoop(ctx, func(c *zkCache) error { return c.fullReload() }); err != nil {
		_ = z.Close()
		return nil, err
	}
	if err := z.startConfigs(ctx); err != nil {
		_ = z.Close()
		return nil, err
	}
	if err := z.startFeatures(ctx); err != nil {
		_ = z.Close()
		return nil, err
	}
	if err := z.startTokens(ctx); err != nil {
		_ = z.Close()
		return nil, err
	}
	if z.acls, err = openZKACLs(ctx, z); err != nil {
		_ = z.Close()
		return nil, err
	}
	return z, nil
}

func (z *ZK) waitSession(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for z.conn.State() != zk.StateHasSession {
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("%w: no ZooKeeper session with %s within %v (last: %s)", ErrUnavailable, z.cfg.ZooKeeperConnect, timeout, z.lastLog.Load())
		case <-ctx.Done():
			return fmt.Errorf("%w: connecting to %s: %w", ErrUnavailable, z.cfg.ZooKeeperConnect, ctx.Err())
		}
	}
	return nil
}

// path is the absolute znode path of rel under the chroot.
func (z *ZK) path(rel string) string { return z.root + "/" + rel }

// ensureBase creates the chroot's components and the base znodes.
func (z *ZK) ensureBase(ctx context.Context, chroot string) error {
	var paths []string
	if chroot != "/" {
		parts := strings.Split(strings.Trim(chroot, "/"), "/")
		for i := range parts {
			paths = append(paths, "/"+strings.Join(parts[:i+1], "/"))
		}
	}
	for _, b := range zBaseNodes {
		paths = append(paths, z.path(b))
	}
	return z.createNodes(ctx, paths)
}

// createPersistent creates each of paths (relative to the chroot) that is
// missing.
func (z *ZK) createPersistent(ctx context.Context, paths []string) error {
	abs := make([]string, len(paths))
	for i, p := range paths {
		abs[i] = z.path(p)
	}
	return z.createNodes(ctx, abs)
}

// createNodes creates each of the absolute paths that is missing, as an
// empty persistent znode, in order (parents first).
func (z *ZK) createNodes(ctx context.Context, paths []string) error {
	for _, p := range paths {
		err := z.call(ctx, "create", p, func() error {
			_, err := z.conn.Create(p, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll))
			if errors.Is(err, zk.ErrNodeExists) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (z *ZK) loadClusterID(ctx context.Context) (string, error) {
	p := z.path(zClusterID)
	for {
		var data []byte
		err := z.call(ctx, "get", p, func() (err error) {
			data, _, err = z.conn.Get(p)
			return err
		})
		if err == nil {
			var d zClusterIDData
			if err := decodeZ(p, data, &d); err != nil {
				return "", err
			}
			return d.ID, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return "", err
		}
		// A new cluster: its finalized features are created with its
		// id, in one transaction, so that a cluster that has an id and
		// no /feature is one created before features were kept.
		id := encodeZ(zClusterIDData{Version: znodeVersion, ID: NewClusterID()})
		_, failed, err := z.multi(ctx, p,
			&zk.CreateRequest{Path: p, Data: id, Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagPersistent},
			&zk.CreateRequest{Path: z.path(zFeature), Data: encodeFeatures(NewClusterFeatures), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagPersistent})
		if failed == 1 && errors.Is(err, zk.ErrNodeExists) {
			err = z.call(ctx, "create", p, func() error {
				_, err := z.conn.Create(p, id, zk.FlagPersistent, zk.WorldACL(zk.PermAll))
				return err
			})
		}
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return "", err
		}
		// Created, or another broker won the race: read it back.
	}
}

// call runs one ZooKeeper operation, failing fast with ErrUnavailable
// when there is no session, and with ctx's error when ctx has ended. An
// operation in flight is not abandoned when ctx ends: the ZooKeeper
// client bounds it (a dead connection is noticed within two thirds of the
// session timeout, and its requests fail). ZooKeeper's own errors
// (ErrNoNode, ErrNodeExists, ErrBadVersion, ...) are wrapped and left for
// the caller to test with errors.Is.
func (z *ZK) call(ctx context.Context, op, path string, fn func() error) error {
	select {
	case <-z.closing:
		return ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("coord: %s %s: %w", op, path, err)
	}
	if st := z.conn.State(); st != zk.StateHasSession {
		return fmt.Errorf("%w: %s %s: ZooKeeper session state %s", ErrUnavailable, op, path, st)
	}
	return z.wrap(op, path, fn())
}

// unavailableErrs are go-zookeeper's errors for "no answer from the
// service".
var unavailableErrs = []error{zk.ErrNoServer, zk.ErrConnectionClosed, zk.ErrSessionExpired, zk.ErrSessionMoved, zk.ErrClosing}

func (z *ZK) wrap(op, path string, err error) error {
	if err == nil {
		return nil
	}
	for _, u := range unavailableErrs {
		if errors.Is(err, u) {
			select {
			case <-z.closing:
				return ErrClosed
			default:
			}
			return fmt.Errorf("%w: %s %s: %w", ErrUnavailable, op, path, err)
		}
	}
	return fmt.Errorf("coord: %s %s: %w", op, path, err)
}

// multi runs a ZooKeeper transaction and reports, besides the error, the
// index of the operation that failed (-1 if none or unknown).
func (z *ZK) multi(ctx context.Context, what string, ops ...any) ([]zk.MultiResponse, int, error) {
	var res []zk.MultiResponse
	err := z.call(ctx, "multi", what, func() (err error) {
		res, err = z.conn.Multi(ops...)
		return err
	})
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrClosed) {
		return res, -1, err
	}
	for i, r := range res {
		// ZooKeeper reports the failing operation's error; those before
		// it have none, those after a generic one.
		if r.Error != nil {
			return res, i, fmt.Errorf("coord: multi %s: op %d: %w", what, i, r.Error)
		}
	}
	return res, -1, err
}

// inLoop runs fn in the cache goroutine and publishes what it changed.
func (z *ZK) inLoop(ctx context.Context, fn func(c *zkCache) error) error {
	req := loopRequest{fn: fn, reply: make(chan error, 1)}
	select {
	case z.cache.requests <- req:
	case <-z.loopDone:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-z.loopDone:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// refresh re-reads in the cache loop what the caller has just written
// (what names the write), so that the caller's next Snapshot shows it. The
// write has happened whatever refresh meets, so a failure is logged, not
// returned, and it leaves nothing stale for good: a read that failed in
// the loop marks the cache for a full reload, which the loop retries until
// one succeeds (zk_cache.go); if ctx ended before the loop took the
// request, the watch on the written znode brings the change instead.
func (z *ZK) refresh(ctx context.Context, what string, fn func(c *zkCache) error) {
	err := z.inLoop(ctx, fn)
	if err == nil || errors.Is(err, ErrClosed) {
		return
	}
	z.log.Warn("coord: metadata cache not refreshed after a write; its watches and the cache loop's full reload bring it up to date",
		"write", what, "err", err)
}

// ClusterID implements Coordinator.
func (z *ZK) ClusterID() string { return z.clusterID }

// Snapshot implements Coordinator.
func (z *ZK) Snapshot() *Snapshot { return z.hub.snapshot() }

// Subscribe implements Coordinator.
func (z *ZK) Subscribe() (*Snapshot, *Subscription) { return z.hub.subscribe() }

// SessionTimeout is the session timeout asked of ZooKeeper (the server
// may clamp it to its bounds).
func (z *ZK) SessionTimeout() time.Duration { return z.cfg.SessionTimeout }

// Close implements Coordinator: the session is closed, so ZooKeeper
// deletes its ephemeral znodes at once.
func (z *ZK) Close() error {
	z.mu.Lock()
	if z.mu.closed {
		z.mu.Unlock()
		return ErrClosed
	}
	z.mu.closed = true
	if z.mu.lead != nil {
		z.mu.lead.end()
		z.mu.lead = nil
	}
	z.mu.Unlock()
	close(z.closing)
	z.conn.Close()
	if z.cache != nil {
		<-z.loopDone
	}
	if z.configs != nil {
		<-z.configs.done
	}
	if z.tokens != nil {
		<-z.tokens.done
	}
	if z.features != nil {
		<-z.features.done
	}
	if z.acls != nil {
		<-z.acls.done
	}
	if z.hub != nil {
		z.hub.close()
	}
	return nil
}

// zkLogger sends go-zookeeper's log to slog at debug level and remembers
// the last line, the best description of an outage's cause.
type zkLogger struct{ z *ZK }

func (l zkLogger) Printf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.z.lastLog.Store(msg)
	l.z.log.Debug("coord: zookeeper client: " + msg)
}

// eventQueue is an unbounded queue of session events: go-zookeeper's
// callback must never block.
type eventQueue struct {
	mu     sync.Mutex
	events []zk.Event
	signal chan struct{}
}

func newEventQueue() *eventQueue { return &eventQueue{signal: make(chan struct{}, 1)} }

func (q *eventQueue) push(ev zk.Event) {
	q.mu.Lock()
	q.events = append(q.events, ev)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// dropThroughSession drops the queued events up to and including the
// last StateHasSession.
func (q *eventQueue) dropThroughSession() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := len(q.events) - 1; i >= 0; i-- {
		if q.events[i].State == zk.StateHasSession {
			q.events = append([]zk.Event(nil), q.events[i+1:]...)
			return
		}
	}
}

func (q *eventQueue) drain() []zk.Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.events
	q.events = nil
	return evs
}
