package coord

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/stratastream/strata/broker/acl"
)

// Kafka's ACL znodes (kafka.zk.ZkAclStore, ZkAclChangeStore), under the
// chroot. Stored data: never change.
const (
	zACLLiteral         = "kafka-acl"                  // /<ResourceType>/<name>
	zACLExtended        = "kafka-acl-extended"         // /prefixed/<ResourceType>/<name>
	zACLLiteralChanges  = "kafka-acl-changes"          // /acl_changes_<seq>: "TOPIC:name"
	zACLExtendedChanges = "kafka-acl-extended-changes" // /acl_changes_<seq>: JSON
	zACLChangePrefix    = "acl_changes_"
)

// aclChangeExpiry is how old a change notification must be before a
// broker deletes it (Kafka's ZkNodeChangeNotificationListener: 15 min).
const aclChangeExpiry = 15 * time.Minute

// aclResourceTypes are the types with a directory under each store.
var aclResourceTypes = []acl.ResourceType{acl.ResourceTopic, acl.ResourceGroup, acl.ResourceCluster,
	acl.ResourceTransactionalID, acl.ResourceDelegationToken, acl.ResourceUser}

func zACLTypeDir(t acl.ResourceType, pt acl.PatternType) string {
	if pt == acl.PatternLiteral {
		return zACLLiteral + "/" + t.Name()
	}
	return zACLExtended + "/" + strings.ToLower(pt.String()) + "/" + t.Name()
}

func zACLPath(p acl.Pattern) string { return zACLTypeDir(p.Type, p.Pattern) + "/" + p.Name }

func zACLChangeDir(pt acl.PatternType) string {
	if pt == acl.PatternLiteral {
		return zACLLiteralChanges
	}
	return zACLExtendedChanges
}

// zACLChangeEvent is the JSON of an extended change notification
// (kafka.zk.ExtendedAclChangeEvent).
type zACLChangeEvent struct {
	Version      int    `json:"version"`
	ResourceType string `json:"resourceType"`
	Name         string `json:"name"`
	PatternType  string `json:"patternType"`
}

// encodeACLChange is the notification's data for a changed pattern.
func encodeACLChange(p acl.Pattern) []byte {
	if p.Pattern == acl.PatternLiteral {
		return []byte(p.Type.String() + ":" + p.Name)
	}
	b, _ := json.Marshal(zACLChangeEvent{Version: 1, ResourceType: p.Type.String(), Name: p.Name, PatternType: p.Pattern.String()}) // strings only
	return b
}

// decodeACLChange parses a notification of the given directory.
func decodeACLChange(dir string, b []byte) (acl.Pattern, error) {
	if dir == zACLLiteralChanges {
		t, name, ok := strings.Cut(string(b), ":")
		p := acl.Pattern{Type: acl.ParseResourceType(t), Name: name, Pattern: acl.PatternLiteral}
		if !ok || p.Type == acl.ResourceUnknown {
			return acl.Pattern{}, fmt.Errorf("coord: ACL change %q: expected ResourceType:name", b)
		}
		return p, nil
	}
	var ev zACLChangeEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		return acl.Pattern{}, fmt.Errorf("coord: ACL change: %w", err)
	}
	if ev.Version != 1 {
		return acl.Pattern{}, fmt.Errorf("coord: ACL change version %d, this build reads 1", ev.Version)
	}
	p := acl.Pattern{Type: acl.ParseResourceType(ev.ResourceType), Name: ev.Name, Pattern: acl.ParsePatternType(ev.PatternType)}
	if p.Type == acl.ResourceUnknown || p.Pattern != acl.PatternPrefixed {
		return acl.Pattern{}, fmt.Errorf("coord: ACL change %s: unknown resource or pattern type", b)
	}
	return p, nil
}

// zkACLs is a ZK coordinator's ACL cache: loaded whole at start and after
// a lost session, then kept current by the change notifications, which
// one goroutine (loop) watches and follows.
type zkACLs struct {
	z     *ZK
	table *aclTable
	// last is the highest notification sequence handled, per change
	// directory; owned by loop (and by openZKACLs before loop starts).
	last map[string]int64
	// refreshes are requests to re-read a pattern just written, so that
	// the writer's next ACLs call shows it. Every change to table goes
	// through loop, each from a fresh read, so an older read never
	// overwrites a newer one.
	refreshes chan aclRefresh
	// purged is when loop last looked for expired notifications, per
	// change directory.
	purged map[string]time.Time
	done   chan struct{}
}

type aclRefresh struct {
	p     acl.Pattern
	reply chan error
}

// openZKACLs creates Kafka's ACL directories if missing, loads every ACL
// and starts following the change notifications.
func openZKACLs(ctx context.Context, z *ZK) (*zkACLs, error) {
	a := &zkACLs{z: z, table: newACLTable(), last: map[string]int64{}, refreshes: make(chan aclRefresh),
		purged: map[string]time.Time{}, done: make(chan struct{})}
	dirs := []string{zACLLiteral, zACLExtended, zACLExtended + "/prefixed", zACLLiteralChanges, zACLExtendedChanges}
	for _, t := range aclResourceTypes {
		dirs = append(dirs, zACLTypeDir(t, acl.PatternLiteral), zACLTypeDir(t, acl.PatternPrefixed))
	}
	if err := z.createPersistent(ctx, dirs); err != nil {
		return nil, err
	}
	watches, err := a.fullLoad(ctx)
	if err != nil {
		return nil, err
	}
	go a.loop(watches)
	return a, nil
}

// fullLoad arms the watches on both change directories, then reads every
// ACL znode. Notifications that arrive during the read are handled
// again afterwards, which is harmless.
func (a *zkACLs) fullLoad(ctx context.Context) (map[string]<-chan zk.Event, error) {
	watches := map[string]<-chan zk.Event{}
	for _, d := range []string{zACLLiteralChanges, zACLExtendedChanges} {
		names, ch, err := a.childrenW(ctx, d)
		if err != nil {
			return nil, err
		}
		watches[d] = ch
		a.last[d] = -1 // sequence numbers start at 0
		for _, n := range names {
			if seq, ok := changeSeq(n); ok && seq > a.last[d] {
				a.last[d] = seq
			}
		}
	}
	all := map[acl.Pattern][]acl.Entry{}
	for _, t := range aclResourceTypes {
		for _, pt := range []acl.PatternType{acl.PatternLiteral, acl.PatternPrefixed} {
			dir := a.z.path(zACLTypeDir(t, pt))
			var names []string
			err := a.z.call(ctx, "children", dir, func() (err error) {
				names, _, err = a.z.conn.Children(dir)
				return err
			})
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				p := acl.Pattern{Type: t, Name: n, Pattern: pt}
				es, _, err := a.read(ctx, p)
				if err != nil {
					return nil, err
				}
				all[p] = es
			}
		}
	}
	a.table.replaceAll(all)
	return watches, nil
}

func (a *zkACLs) childrenW(ctx context.Context, dir string) ([]string, <-chan zk.Event, error) {
	p := a.z.path(dir)
	var names []string
	var ch <-chan zk.Event
	err := a.z.call(ctx, "children", p, func() (err error) {
		names, _, ch, err = a.z.conn.ChildrenW(p)
		return err
	})
	return names, ch, err
}

// read returns a pattern's entries and znode version; none and version
// -1 when the znode does not exist. Entries Kafka could not parse either
// make the whole read fail.
func (a *zkACLs) read(ctx context.Context, p acl.Pattern) ([]acl.Entry, int32, error) {
	path := a.z.path(zACLPath(p))
	var data []byte
	var st *zk.Stat
	err := a.z.call(ctx, "get", path, func() (err error) {
		data, st, err = a.z.conn.Get(path)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, -1, nil
	}
	if err != nil {
		return nil, 0, err
	}
	es, err := acl.DecodeEntries(data)
	if err != nil {
		return nil, 0, fmt.Errorf("coord: znode %s: %w", path, err)
	}
	return es, st.Version, nil
}

func changeSeq(name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, zACLChangePrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// loop follows the change notifications. A failed read (ZooKeeper
// unreachable) or a lost watch (session expired) makes it load
// everything again, every fullReloadRetry until that succeeds.
func (a *zkACLs) loop(watches map[string]<-chan zk.Event) {
	defer close(a.done)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	needFull := false
	for {
		if needFull {
			w, err := a.fullLoad(bg)
			if err == nil {
				watches, needFull = w, false
			} else {
				if errors.Is(err, ErrClosed) {
					return
				}
				a.z.log.Debug("coord: ACL reload failed; retrying", "err", err)
				retry.Reset(fullReloadRetry)
			}
		}
		var dir string
		var ev zk.Event
		select {
		case <-a.z.closing:
			return
		case <-retry.C:
			continue
		case r := <-a.refreshes:
			es, _, err := a.read(bg, r.p)
			if err == nil {
				a.table.set(r.p, es)
			} else if !errors.Is(err, ErrClosed) {
				needFull = true
			}
			r.reply <- err
			continue
		case ev = <-watches[zACLLiteralChanges]:
			dir = zACLLiteralChanges
		case ev = <-watches[zACLExtendedChanges]:
			dir = zACLExtendedChanges
		}
		if needFull {
			continue // a reload is pending anyway
		}
		if ev.Type == zk.EventNotWatching || ev.Err != nil {
			needFull = true
			continue
		}
		ch, err := a.follow(dir)
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return
			}
			a.z.log.Warn("coord: following ACL change notifications failed; reloading all ACLs", "dir", dir, "err", err)
			needFull = true
			continue
		}
		watches[dir] = ch
	}
}

// follow re-arms the watch on a change directory and applies the
// notifications not yet handled: each names a resource pattern, whose
// znode is read again. Expired notifications are deleted.
func (a *zkACLs) follow(dir string) (<-chan zk.Event, error) {
	names, ch, err := a.childrenW(bg, dir)
	if err != nil {
		return nil, err
	}
	type change struct {
		seq  int64
		name string
	}
	var todo []change
	for _, n := range names {
		if seq, ok := changeSeq(n); ok {
			todo = append(todo, change{seq, n})
		}
	}
	slices.SortFunc(todo, func(x, y change) int { return cmp.Compare(x.seq, y.seq) })
	if time.Since(a.purged[dir]) >= aclPurgeInterval {
		a.purged[dir] = time.Now()
		for _, c := range todo {
			if c.seq > a.last[dir] || !a.expire(dir, c.name) {
				break // later ones are younger
			}
		}
	}
	for _, c := range todo {
		if c.seq <= a.last[dir] {
			continue
		}
		path := a.z.path(dir + "/" + c.name)
		var data []byte
		err := a.z.call(bg, "get", path, func() (err error) {
			data, _, err = a.z.conn.Get(path)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // expired and deleted by another broker
		}
		if err != nil {
			return nil, err
		}
		p, err := decodeACLChange(dir, data)
		if err != nil {
			a.z.log.Warn("coord: ignoring an ACL change notification", "znode", path, "err", err)
		} else {
			es, _, err := a.read(bg, p)
			if err != nil {
				return nil, err
			}
			a.table.set(p, es)
		}
		if c.seq > a.last[dir] {
			a.last[dir] = c.seq
		}
	}
	return ch, nil
}

// aclPurgeInterval is how often loop looks for expired notifications
// (when notifications arrive).
const aclPurgeInterval = time.Minute

// expire deletes an already handled notification if it is older than
// aclChangeExpiry, and reports whether it was (or is gone). Failures are
// left for the next pass or another broker.
func (a *zkACLs) expire(dir, name string) bool {
	path := a.z.path(dir + "/" + name)
	var st *zk.Stat
	var ok bool
	if err := a.z.call(bg, "exists", path, func() (err error) {
		ok, st, err = a.z.conn.Exists(path)
		return err
	}); err != nil {
		return false
	}
	if !ok {
		return true
	}
	if time.Since(time.UnixMilli(st.Ctime)) < aclChangeExpiry {
		return false
	}
	if err := a.z.call(bg, "delete", path, func() error { return a.z.conn.Delete(path, st.Version) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
		a.z.log.Debug("coord: could not delete an expired ACL change notification", "znode", path, "err", err)
		return false
	}
	return true
}

// maxACLRetries bounds the compare-and-set retries of one pattern's
// update under contention.
const maxACLRetries = 50

// update changes one pattern's entries with compare-and-set on its
// znode version, writing the change notification in the same
// transaction, and retries on a conflict. change gets the current
// entries and returns the new ones and whether anything changed.
func (a *zkACLs) update(ctx context.Context, p acl.Pattern, change func([]acl.Entry) ([]acl.Entry, bool)) ([]acl.Entry, error) {
	path := a.z.path(zACLPath(p))
	note := &zk.CreateRequest{Path: a.z.path(zACLChangeDir(p.Pattern) + "/" + zACLChangePrefix), Data: encodeACLChange(p),
		Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagSequence}
	for attempt := 0; attempt < maxACLRetries; attempt++ {
		cur, version, err := a.read(ctx, p)
		if err != nil {
			return nil, err
		}
		next, changed := change(cur)
		if !changed {
			a.refresh(ctx, p)
			return cur, nil
		}
		var op any
		switch {
		case version < 0:
			op = &zk.CreateRequest{Path: path, Data: acl.EncodeEntries(next), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagPersistent}
		case len(next) == 0:
			op = &zk.DeleteRequest{Path: path, Version: version}
		default:
			op = &zk.SetDataRequest{Path: path, Data: acl.EncodeEntries(next), Version: version}
		}
		_, _, err = a.z.multi(ctx, "acl "+path, op, note)
		if errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) || (version >= 0 && errors.Is(err, zk.ErrNoNode)) {
			continue // another broker wrote first: read again
		}
		if err != nil {
			return nil, err
		}
		a.refresh(ctx, p)
		return next, nil
	}
	return nil, fmt.Errorf("%w: %s changed %d times while updating it", ErrVersionConflict, path, maxACLRetries)
}

// refresh has loop re-read p after a write. The write happened whatever
// refresh meets: a failure is logged, and loop's full reload (or the
// change notification) brings the change instead.
func (a *zkACLs) refresh(ctx context.Context, p acl.Pattern) {
	r := aclRefresh{p: p, reply: make(chan error, 1)}
	var err error
	select {
	case a.refreshes <- r:
		select {
		case err = <-r.reply:
		case <-ctx.Done():
			err = ctx.Err()
		}
	case <-a.done:
		return
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		a.z.log.Warn("coord: ACL cache not refreshed after a write; the change notification brings it", "pattern", p, "err", err)
	}
}

// CreateACLs implements ACLStore.
func (z *ZK) CreateACLs(ctx context.Context, bindings []acl.Binding) []error {
	errs := make([]error, len(bindings))
	order, idx := groupByPattern(bindings)
	for _, p := range order {
		var add []acl.Entry
		var valid []int
		for _, i := range idx[p] {
			if err := bindings[i].Validate(); err != nil {
				errs[i] = err
				continue
			}
			add = append(add, bindings[i].Entry)
			valid = append(valid, i)
		}
		if len(add) == 0 {
			continue
		}
		_, err := z.acls.update(ctx, p, func(cur []acl.Entry) ([]acl.Entry, bool) { return merged(cur, add) })
		for _, i := range valid {
			errs[i] = err
		}
	}
	return errs
}

// DeleteACLs implements ACLStore. The patterns come from this broker's
// cache (as in Kafka's AclAuthorizer); each matching pattern is then
// updated with compare-and-set, the filters applied to the entries read
// from ZooKeeper, so an entry another broker added a moment ago is
// deleted too, and what is reported deleted is what was.
func (z *ZK) DeleteACLs(ctx context.Context, filters []acl.Filter) []ACLDeleteResult {
	res := make([]ACLDeleteResult, len(filters))
	var patterns []acl.Pattern
	for p := range z.acls.table.all() {
		for _, f := range filters {
			if f.MatchesPattern(p) {
				patterns = append(patterns, p)
				break
			}
		}
	}
	sortPatterns(patterns)
	for _, p := range patterns {
		var matched [][]acl.Entry // per filter, of the attempt that landed
		_, err := z.acls.update(ctx, p, func(cur []acl.Entry) ([]acl.Entry, bool) {
			matched = make([][]acl.Entry, len(filters))
			var drop []acl.Entry
			for i, f := range filters {
				if !f.MatchesPattern(p) {
					continue
				}
				for _, e := range cur {
					if f.MatchesEntry(e) {
						matched[i] = append(matched[i], e)
						drop = append(drop, e)
					}
				}
			}
			next := without(cur, drop)
			return next, len(next) != len(cur)
		})
		for i := range filters {
			if !filters[i].MatchesPattern(p) {
				continue
			}
			if err != nil {
				res[i].Err = err
				continue
			}
			for _, e := range matched[i] {
				res[i].Deleted = append(res[i].Deleted, acl.Binding{Pattern: p, Entry: e})
			}
		}
	}
	for i := range res {
		if res[i].Err != nil {
			res[i].Deleted = nil
		}
		slices.SortFunc(res[i].Deleted, compareBindings)
	}
	return res
}

// ACLs implements ACLStore.
func (z *ZK) ACLs() ([]acl.Binding, <-chan struct{}) { return z.acls.table.snapshot() }
