package coord

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Entity configs: Kafka's dynamic configs of an entity, kept in ZooKeeper
// at /config/<entity type>/<entity name>, JSON {"version":1,"config":
// {...}}, each write followed (in the same transaction) by a change
// notification /config/changes/config_change_<seq> {"version":2,
// "entity_path":"<entity type>/<entity name>"} which every broker
// watches (Kafka's ZkConfigManager); the embedded coordinator keeps them
// in its file. Entity names are znode names: a caller whose names need
// it sanitizes them (users: SanitizeUser). The cluster-wide default of
// an entity type is the entity named DefaultEntity.
//
// The entity types are EntityTypes; a new one is one more element
// there, the watch and the cache are shared. EntityUserClients is the one
// nested type: Kafka's /config/users/<user>/clients/<client id> (the
// quotas of a user and client id together), whose entity names are
// "<user>/<client id>" (both sanitized), its notifications' entity_path
// "users/<user>/clients/<client id>".

// Entity types, as Kafka names them in /config.
const (
	EntityUsers   = "users"
	EntityBrokers = "brokers"
	EntityClients = "clients"
	// EntityGroups are the configs of a consumer, share or streams
	// group (Kafka's GROUP config resource), by group id sanitized as
	// SanitizeUser does.
	EntityGroups = "groups"
	// EntityUserClients is /config/users/<user>/clients/<client id>.
	EntityUserClients = "users/clients"
)

// DefaultEntity is Kafka's name of an entity type's default entity
// (ZooKeeperInternals.DEFAULT_STRING): /config/brokers/<default> holds
// the dynamic broker configs every broker has unless its own entity
// overrides them.
const DefaultEntity = "<default>"

// EntityTypes are the entity types the coordinators keep and watch.
var EntityTypes = []string{EntityUsers, EntityBrokers, EntityClients, EntityUserClients, EntityGroups}

// UserClientEntity is the EntityUserClients name of a (sanitized) user
// and client id.
func UserClientEntity(user, clientID string) string { return user + "/" + clientID }

// entityZPath is an entity's znode below /config and its notification's
// entity_path: <type>/<name>, or users/<user>/clients/<client id>.
func entityZPath(entityType, name string) string {
	if entityType == EntityUserClients {
		u, c, _ := strings.Cut(name, "/")
		return EntityUsers + "/" + u + "/" + EntityClients + "/" + c
	}
	return entityType + "/" + name
}

// EntityConfigStore keeps entity configs (see above). Reads come from a
// cache that every session keeps current by the change notifications: a
// change by any session is seen by every other within about a second.
// After AlterEntityConfig returns nil the caller's reads show it.
type EntityConfigStore interface {
	// EntityConfigs returns every entity of entityType with its config
	// (entity name to key to value; a copy), from the cache.
	EntityConfigs(entityType string) map[string]map[string]string

	// AlterEntityConfig replaces one entity's config by what fn returns
	// for the current one (nil when the entity has none); fn returning
	// nil removes the entity, an error aborts and is returned as is. The
	// write is a compare-and-set: fn may be called again after a
	// concurrent write. Errors: an unknown entity type or empty name,
	// ErrUnavailable, ErrVersionConflict after repeated conflicts.
	AlterEntityConfig(ctx context.Context, entityType, name string, fn func(cur map[string]string) (map[string]string, error)) error

	// WatchEntityConfigs returns a channel that receives (without
	// blocking the sender: one pending signal at most) after the cache
	// took a change of any entity config, and a function that stops the
	// watch.
	WatchEntityConfigs() (<-chan struct{}, func())
}

// checkEntity validates an entity type and name.
func checkEntity(entityType, name string) error {
	if !slices.Contains(EntityTypes, entityType) {
		return fmt.Errorf("coord: unknown entity type %q", entityType)
	}
	if entityType == EntityUserClients {
		u, c, ok := strings.Cut(name, "/")
		if !ok || !validEntityName(u) || !validEntityName(c) {
			return fmt.Errorf("coord: invalid %s entity name %q: want <user>/<client id>", entityType, name)
		}
		return nil
	}
	if !validEntityName(name) {
		return fmt.Errorf("coord: invalid %s entity name %q", entityType, name)
	}
	return nil
}

func validEntityName(name string) bool {
	return name != "" && name != "." && name != ".." && !containsSlash(name)
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}

// entityWatchers fans a change signal out to the watch channels.
type entityWatchers struct {
	mu   sync.Mutex
	next int
	chs  map[int]chan struct{}
}

func (w *entityWatchers) watch() (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.chs == nil {
		w.chs = map[int]chan struct{}{}
	}
	id := w.next
	w.next++
	ch := make(chan struct{}, 1)
	w.chs[id] = ch
	return ch, func() {
		w.mu.Lock()
		delete(w.chs, id)
		w.mu.Unlock()
	}
}

func (w *entityWatchers) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// copyEntities copies one entity type's configs.
func copyEntities(in map[string]map[string]string) map[string]map[string]string {
	out := make(map[string]map[string]string, len(in))
	for n, c := range in {
		out[n] = maps.Clone(c)
	}
	return out
}

// equalEntities compares two caches of all entity types.
func equalEntities(a, b map[string]map[string]map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for typ, ea := range a {
		eb, ok := b[typ]
		if !ok || len(ea) != len(eb) {
			return false
		}
		for n, ca := range ea {
			cb, ok := eb[n]
			if !ok || !maps.Equal(ca, cb) {
				return false
			}
		}
	}
	return true
}
