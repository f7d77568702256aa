package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Kafka's znodes of entity configs and config change notifications, under
// the chroot. Never change them: Kafka's tools read and write them.
const (
	zConfig              = "config"
	zConfigChanges       = "config/changes"
	zConfigChangePfx     = "config_change_"
	zEntityConfigVersion = 1
	zChangeVersion       = 2
	// zChangeExpiry is Kafka's ZkConfigManager changeExpirationMs: older
	// notifications are deleted by the brokers.
	zChangeExpiry = 15 * time.Minute
	// zConfigResync re-reads the entity configs even without a
	// notification, in case a writer (an old tool) changed a znode
	// without one.
	zConfigResync = time.Minute
)

type zEntityConfigData struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

type zChangeData struct {
	Version    int    `json:"version"`
	EntityPath string `json:"entity_path"`
}

// zkConfigs is the ZK coordinator's cache of the entity configs of every
// type in EntityTypes, reloaded by its own goroutine whenever
// /config/changes gets a child (and every zConfigResync).
type zkConfigs struct {
	z        *ZK
	done     chan struct{}
	watchers entityWatchers
	mu       struct {
		sync.Mutex
		// entities: entity type to znode name to config.
		entities map[string]map[string]map[string]string
		// writes counts this session's writes put into entities, so a
		// reload that read the znodes before one does not undo it.
		writes uint64
	}
}

// startConfigs creates the config znodes if missing, loads the entity
// configs and starts the watch loop (ended by Close).
func (z *ZK) startConfigs(ctx context.Context) error {
	c := &zkConfigs{z: z, done: make(chan struct{})}
	c.mu.entities = map[string]map[string]map[string]string{}
	dirs := []string{zConfig, zConfigChanges}
	for _, typ := range EntityTypes {
		if typ != EntityUserClients { // below each user's znode
			dirs = append(dirs, zConfig+"/"+typ)
		}
	}
	if err := z.createPersistent(ctx, dirs); err != nil {
		return err
	}
	if err := c.reload(ctx); err != nil {
		return err
	}
	z.configs = c
	go z.watchChanges(changeWatch{dir: zConfigChanges, prefix: zConfigChangePfx, resync: zConfigResync,
		what: "entity configs", reload: c.reload}, c.done)
	return nil
}

// reload reads every entity znode of every type and replaces the cache;
// the watchers hear of it when anything changed.
func (c *zkConfigs) reload(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		writes := c.mu.writes
		c.mu.Unlock()
		all, err := c.readAll(ctx)
		if err != nil {
			return err
		}
		c.mu.Lock()
		if c.mu.writes != writes && attempt < 10 {
			c.mu.Unlock()
			continue // a write of ours landed meanwhile: read again
		}
		changed := !equalEntities(c.mu.entities, all)
		c.mu.entities = all
		c.mu.Unlock()
		if changed {
			c.watchers.notify()
		}
		return nil
	}
}

// readAll reads every entity znode of every type.
func (c *zkConfigs) readAll(ctx context.Context) (map[string]map[string]map[string]string, error) {
	z := c.z
	all := map[string]map[string]map[string]string{}
	for _, typ := range EntityTypes {
		if typ == EntityUserClients {
			ents, err := c.reloadUserClients(ctx, all[EntityUsers])
			if err != nil {
				return nil, err
			}
			all[typ] = ents
			continue
		}
		p := z.path(zConfig + "/" + typ)
		var names []string
		if err := z.call(ctx, "children", p, func() (err error) {
			names, _, err = z.conn.Children(p)
			return err
		}); err != nil {
			return nil, err
		}
		ents := map[string]map[string]string{}
		for _, n := range names {
			cfg, _, err := c.read(ctx, typ, n)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return nil, err
			}
			ents[n] = nonNil(cfg)
		}
		all[typ] = ents
	}
	return all, nil
}

// reloadUserClients reads /config/users/<user>/clients/<client id> of
// every user (users: the users' entities just read).
func (c *zkConfigs) reloadUserClients(ctx context.Context, users map[string]map[string]string) (map[string]map[string]string, error) {
	z := c.z
	ents := map[string]map[string]string{}
	for u := range users {
		p := z.path(zConfig + "/" + EntityUsers + "/" + u + "/" + EntityClients)
		var names []string
		err := z.call(ctx, "children", p, func() (err error) {
			names, _, err = z.conn.Children(p)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			name := UserClientEntity(u, n)
			cfg, _, err := c.read(ctx, EntityUserClients, name)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return nil, err
			}
			ents[name] = nonNil(cfg)
		}
	}
	return ents, nil
}

// read returns an entity znode's config and version (zk.ErrNoNode wrapped
// when it does not exist). A znode that does not parse is an error: its
// configs are not dropped silently.
func (c *zkConfigs) read(ctx context.Context, typ, name string) (map[string]string, int32, error) {
	z := c.z
	p := z.path(zConfig + "/" + entityZPath(typ, name))
	var data []byte
	var st *zk.Stat
	if err := z.call(ctx, "get", p, func() (err error) {
		data, st, err = z.conn.Get(p)
		return err
	}); err != nil {
		return nil, 0, err
	}
	var d zEntityConfigData
	if len(data) > 0 {
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, 0, fmt.Errorf("coord: znode %s: %w", p, err)
		}
		if d.Version != zEntityConfigVersion {
			return nil, 0, fmt.Errorf("coord: znode %s has version %d, this build reads %d", p, d.Version, zEntityConfigVersion)
		}
	}
	return d.Config, st.Version, nil
}

// entities returns the cached configs of one entity type (shared: do not
// modify).
func (c *zkConfigs) entities(typ string) map[string]map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.entities[typ]
}

// EntityConfigs implements EntityConfigStore.
func (z *ZK) EntityConfigs(entityType string) map[string]map[string]string {
	return copyEntities(z.configs.entities(entityType))
}

// WatchEntityConfigs implements EntityConfigStore.
func (z *ZK) WatchEntityConfigs() (<-chan struct{}, func()) { return z.configs.watchers.watch() }

// AlterEntityConfig implements EntityConfigStore: a read of the entity
// znode and one multi that writes it (compare-and-set on its version;
// deleted when fn returns nil) and creates the change notification,
// retried on a concurrent write.
func (z *ZK) AlterEntityConfig(ctx context.Context, entityType, name string, fn func(cur map[string]string) (map[string]string, error)) error {
	if err := checkEntity(entityType, name); err != nil {
		return err
	}
	c := z.configs
	p := z.path(zConfig + "/" + entityZPath(entityType, name))
	note := zChangeData{Version: zChangeVersion, EntityPath: entityZPath(entityType, name)}
	if entityType == EntityUserClients {
		// Kafka creates the parents without data (createRecursive).
		u, _, _ := strings.Cut(name, "/")
		parent := zConfig + "/" + EntityUsers + "/" + u
		if err := z.createPersistent(ctx, []string{parent, parent + "/" + EntityClients}); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		if attempt >= 20 {
			return fmt.Errorf("%w: %s entity %q: writers kept conflicting", ErrVersionConflict, entityType, name)
		}
		cfg, version, err := c.read(ctx, entityType, name)
		exists := true
		if errors.Is(err, zk.ErrNoNode) {
			exists, cfg, err = false, nil, nil
		}
		if err != nil {
			return err
		}
		next, err := fn(maps.Clone(cfg))
		if err != nil {
			return err
		}
		if !exists && next == nil {
			return nil
		}
		data := encodeConfigZ(zEntityConfigData{Version: zEntityConfigVersion, Config: nonNil(next)})
		var op any
		switch {
		case !exists:
			op = &zk.CreateRequest{Path: p, Data: data, Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagPersistent}
		case next == nil:
			op = &zk.DeleteRequest{Path: p, Version: version}
		default:
			op = &zk.SetDataRequest{Path: p, Data: data, Version: version}
		}
		noteOp := &zk.CreateRequest{Path: z.path(zConfigChanges + "/" + zConfigChangePfx), Data: encodeConfigZ(note), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagSequence}
		what := "alter configs of " + entityType + " entity " + name
		_, _, err = z.multi(ctx, what, op, noteOp)
		switch {
		case err == nil:
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode):
			continue // another writer came first: read again
		case errors.Is(err, zk.ErrNotEmpty):
			// Kafka keeps /config/users/<user>/clients/... below: leave
			// an empty config instead of deleting.
			next = map[string]string{}
			_, _, err = z.multi(ctx, what,
				&zk.SetDataRequest{Path: p, Data: encodeConfigZ(zEntityConfigData{Version: zEntityConfigVersion, Config: next}), Version: version}, noteOp)
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
		c.mu.Lock()
		all := maps.Clone(c.mu.entities)
		ents := maps.Clone(all[entityType])
		if ents == nil {
			ents = map[string]map[string]string{}
		}
		if next == nil {
			delete(ents, name)
		} else {
			ents[name] = maps.Clone(next)
		}
		all[entityType] = ents
		c.mu.entities = all
		c.mu.writes++
		c.mu.Unlock()
		c.watchers.notify()
		return nil
	}
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// encodeConfigZ is encodeZ without HTML escaping: Kafka writes
// "brokers/<default>", not "brokers/\u003cdefault\u003e".
func encodeConfigZ(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("coord: encode znode: " + err.Error()) // only our own types
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
