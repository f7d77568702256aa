package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Kafka's znodes of user configs and config change notifications, under
// the chroot. Never change them: Kafka's tools read and write them.
const (
	zConfig            = "config"
	zConfigUsers       = "config/users"
	zConfigChanges     = "config/changes"
	zConfigChangePfx   = "config_change_"
	zUserEntityVersion = 1
	zChangeVersion     = 2
	// zChangeExpiry is Kafka's ZkConfigManager changeExpirationMs: older
	// notifications are deleted by the brokers.
	zChangeExpiry = 15 * time.Minute
	// zUsersResync re-reads the users even without a notification, in
	// case a writer (an old tool) changed a user znode without one.
	zUsersResync = time.Minute
)

type zUserConfigData struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

type zChangeData struct {
	Version    int    `json:"version"`
	EntityPath string `json:"entity_path"`
}

// zkUsers is the ZK coordinator's cache of users' SCRAM credentials,
// reloaded by its own goroutine whenever /config/changes gets a child.
type zkUsers struct {
	z    *ZK
	done chan struct{}
	mu   struct {
		sync.Mutex
		users map[string]map[string]string // SCRAM keys only
	}
}

// startUsers creates the config znodes if missing, loads the users and
// starts the watch loop (ended by Close).
func (z *ZK) startUsers(ctx context.Context) error {
	u := &zkUsers{z: z, done: make(chan struct{})}
	u.mu.users = map[string]map[string]string{}
	for _, p := range []string{zConfig, zConfigUsers, zConfigChanges} {
		p := z.path(p)
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
	if err := u.reload(ctx); err != nil {
		return err
	}
	z.users = u
	go u.loop()
	return nil
}

func (u *zkUsers) loop() {
	defer close(u.done)
	z := u.z
	backoff := 100 * time.Millisecond
	for {
		var ch <-chan zk.Event
		p := z.path(zConfigChanges)
		var children []string
		err := z.call(bg, "watch", p, func() (err error) {
			children, _, ch, err = z.conn.ChildrenW(p)
			return err
		})
		if err == nil {
			err = u.reload(bg)
		}
		if err == nil {
			u.purge(children)
			backoff = 100 * time.Millisecond
		} else {
			if errors.Is(err, ErrClosed) {
				return
			}
			z.log.Debug("coord: user credentials not reloaded; retrying", "err", err)
			ch = nil
		}
		wait := time.NewTimer(zUsersResync)
		if ch == nil {
			wait.Reset(backoff)
			backoff = min(2*backoff, 2*time.Second)
		}
		select {
		case <-ch:
		case <-wait.C:
		case <-z.closing:
			wait.Stop()
			return
		}
		wait.Stop()
	}
}

// reload reads every user znode and replaces the cache.
func (u *zkUsers) reload(ctx context.Context) error {
	z := u.z
	p := z.path(zConfigUsers)
	var names []string
	if err := z.call(ctx, "children", p, func() (err error) {
		names, _, err = z.conn.Children(p)
		return err
	}); err != nil {
		return err
	}
	users := map[string]map[string]string{}
	for _, n := range names {
		cfg, _, err := u.read(ctx, n)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		user, err := DesanitizeUser(n)
		if err != nil {
			z.log.Warn("coord: user config znode with a name that is not URL-encoded; skipped", "znode", n)
			continue
		}
		if m := scramOnly(cfg); m != nil {
			users[user] = m
		}
	}
	u.mu.Lock()
	u.mu.users = users
	u.mu.Unlock()
	return nil
}

// read returns a user znode's config and version (zk.ErrNoNode wrapped
// when it does not exist). A znode that does not parse is an error: its
// credentials are not dropped silently.
func (u *zkUsers) read(ctx context.Context, sanitized string) (map[string]string, int32, error) {
	z := u.z
	p := z.path(zConfigUsers + "/" + sanitized)
	var data []byte
	var st *zk.Stat
	if err := z.call(ctx, "get", p, func() (err error) {
		data, st, err = z.conn.Get(p)
		return err
	}); err != nil {
		return nil, 0, err
	}
	var d zUserConfigData
	if len(data) > 0 {
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, 0, fmt.Errorf("coord: znode %s: %w", p, err)
		}
		if d.Version != zUserEntityVersion {
			return nil, 0, fmt.Errorf("coord: znode %s has version %d, this build reads %d", p, d.Version, zUserEntityVersion)
		}
	}
	return d.Config, st.Version, nil
}

// purge deletes notifications older than Kafka's 15 minutes.
func (u *zkUsers) purge(children []string) {
	z := u.z
	now := time.Now()
	for _, c := range children {
		if !strings.HasPrefix(c, zConfigChangePfx) {
			continue
		}
		p := z.path(zConfigChanges + "/" + c)
		var st *zk.Stat
		if err := z.call(bg, "exists", p, func() (err error) {
			_, st, err = z.conn.Exists(p)
			return err
		}); err != nil || st == nil || st.Ctime == 0 {
			continue
		}
		if now.Sub(time.UnixMilli(st.Ctime)) > zChangeExpiry {
			_ = z.call(bg, "delete", p, func() error { return z.conn.Delete(p, -1) })
		}
	}
}

// ScramCredential implements ScramStore.
func (z *ZK) ScramCredential(user, mechanism string) (string, bool) {
	z.users.mu.Lock()
	defer z.users.mu.Unlock()
	c, ok := z.users.mu.users[user][mechanism]
	return c, ok
}

// ScramUsers implements ScramStore.
func (z *ZK) ScramUsers() map[string]map[string]string {
	z.users.mu.Lock()
	defer z.users.mu.Unlock()
	return copyUsers(z.users.mu.users)
}

// AlterScramCredentials implements ScramStore: a read of the user znode
// and one multi that writes it (compare-and-set on its version; deleted
// when no config is left) and creates the change notification, retried on
// a concurrent write.
func (z *ZK) AlterScramCredentials(ctx context.Context, user string, alt ScramAlteration) error {
	if err := validateAlteration(user, alt); err != nil {
		return err
	}
	u := z.users
	name := SanitizeUser(user)
	p := z.path(zConfigUsers + "/" + name)
	note := zChangeData{Version: zChangeVersion, EntityPath: "users/" + name}
	for attempt := 0; ; attempt++ {
		if attempt >= 20 {
			return fmt.Errorf("%w: user %q: writers kept conflicting", ErrVersionConflict, user)
		}
		cfg, version, err := u.read(ctx, name)
		exists := true
		if errors.Is(err, zk.ErrNoNode) {
			exists, cfg, err = false, nil, nil
		}
		if err != nil {
			return err
		}
		next, err := applyAlteration(cfg, alt)
		if err != nil {
			return err
		}
		data := encodeZ(zUserConfigData{Version: zUserEntityVersion, Config: nonNil(next)})
		var op any
		switch {
		case !exists:
			op = &zk.CreateRequest{Path: p, Data: data, Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagPersistent}
		case next == nil:
			op = &zk.DeleteRequest{Path: p, Version: version}
		default:
			op = &zk.SetDataRequest{Path: p, Data: data, Version: version}
		}
		noteOp := &zk.CreateRequest{Path: z.path(zConfigChanges + "/" + zConfigChangePfx), Data: encodeZ(note), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagSequence}
		_, _, err = z.multi(ctx, "alter credentials of user "+name, op, noteOp)
		switch {
		case err == nil:
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode):
			continue // another writer came first: read again
		case errors.Is(err, zk.ErrNotEmpty):
			// Kafka keeps /config/users/<user>/clients/... below: leave
			// an empty config instead of deleting.
			_, _, err = z.multi(ctx, "alter credentials of user "+name,
				&zk.SetDataRequest{Path: p, Data: encodeZ(zUserConfigData{Version: zUserEntityVersion, Config: map[string]string{}}), Version: version}, noteOp)
			if errors.Is(err, zk.ErrBadVersion) {
				continue
			}
			if err != nil {
				return err
			}
		default:
			return err
		}
		// Read-your-writes: the cache takes the new state now; the
		// watch reload brings the same.
		u.mu.Lock()
		users := copyUsers(u.mu.users)
		if m := scramOnly(next); m != nil {
			users[user] = m
		} else {
			delete(users, user)
		}
		u.mu.users = users
		u.mu.Unlock()
		return nil
	}
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
