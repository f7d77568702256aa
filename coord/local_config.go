package coord

import (
	"context"
	"fmt"
	"maps"
)

// The embedded coordinator keeps entity configs in its file: the users'
// in localFile.Users (as before entity configs were generic), the other
// types' in localFile.Configs, written atomically like the rest of the
// file (mode 0600: user configs hold credentials).

// entitiesLocked returns one entity type's configs from f (shared).
func entitiesLocked(f *localFile, typ string) map[string]map[string]string {
	if typ == EntityUsers {
		return f.Users
	}
	return f.Configs[typ]
}

// EntityConfigs implements EntityConfigStore.
func (ss *LocalSession) EntityConfigs(entityType string) map[string]map[string]string {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	ents := copyEntities(entitiesLocked(&s.mu.file, entityType))
	if entityType == EntityUsers {
		// The file keeps user names as they are; entity names are
		// znode names, as in ZooKeeper.
		out := make(map[string]map[string]string, len(ents))
		for u, c := range ents {
			if u != DefaultEntity { // the file keeps the default entity's name
				u = SanitizeUser(u)
			}
			out[u] = c
		}
		ents = out
	}
	return ents
}

// WatchEntityConfigs implements EntityConfigStore.
func (ss *LocalSession) WatchEntityConfigs() (<-chan struct{}, func()) {
	return ss.store.configWatchers.watch()
}

// AlterEntityConfig implements EntityConfigStore: the file is replaced
// atomically with the new config before it returns.
func (ss *LocalSession) AlterEntityConfig(ctx context.Context, entityType, name string, fn func(cur map[string]string) (map[string]string, error)) error {
	if err := checkEntity(entityType, name); err != nil {
		return err
	}
	if entityType == EntityUsers && name != DefaultEntity {
		// (A user literally named <default> shares the default
		// entity's key in the file; Kafka tells them apart by the
		// sanitized name.)
		user, err := DesanitizeUser(name)
		if err != nil {
			return fmt.Errorf("coord: user entity name %q is not URL-encoded", name)
		}
		name = user
	}
	return ss.alterEntity(ctx, entityType, name, fn)
}

// alterEntity is AlterEntityConfig on the file's own entity name (a user
// name as it is).
func (ss *LocalSession) alterEntity(ctx context.Context, entityType, name string, fn func(cur map[string]string) (map[string]string, error)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("coord: alter %s entity config: %w", entityType, err)
	}
	s := ss.store
	// fn runs without the store's lock (it may read the store); the
	// write happens only if the entity is still what fn saw, else fn
	// runs again, as ZooKeeper's compare-and-set.
	var f localFile
	var next map[string]string
	var exists bool
	for attempt := 0; ; attempt++ {
		if attempt >= 20 {
			return fmt.Errorf("%w: %s entity %q: writers kept conflicting", ErrVersionConflict, entityType, name)
		}
		s.mu.Lock()
		if err := ss.checkLocked(); err != nil {
			s.mu.Unlock()
			return err
		}
		cur, ok := entitiesLocked(&s.mu.file, entityType)[name]
		cur = maps.Clone(cur)
		s.mu.Unlock()
		n, err := fn(maps.Clone(cur))
		if err != nil {
			return err
		}
		s.mu.Lock()
		if err := ss.checkLocked(); err != nil {
			s.mu.Unlock()
			return err
		}
		now, nowOK := entitiesLocked(&s.mu.file, entityType)[name]
		if nowOK != ok || !maps.Equal(now, cur) {
			s.mu.Unlock()
			continue
		}
		f, next, exists = s.mu.file, n, ok
		break
	}
	defer s.mu.Unlock()
	if !exists && next == nil {
		return nil
	}
	ents := maps.Clone(entitiesLocked(&f, entityType))
	if ents == nil {
		ents = map[string]map[string]string{}
	}
	if next == nil {
		delete(ents, name)
	} else {
		ents[name] = maps.Clone(next)
	}
	if len(ents) == 0 {
		ents = nil
	}
	if entityType == EntityUsers {
		f.Users = ents
	} else {
		f.Configs = maps.Clone(f.Configs)
		if f.Configs == nil {
			f.Configs = map[string]map[string]map[string]string{}
		}
		if ents == nil {
			delete(f.Configs, entityType)
		} else {
			f.Configs[entityType] = ents
		}
		if len(f.Configs) == 0 {
			f.Configs = nil
		}
	}
	if err := s.persistLocked(&f, s.mu.topics); err != nil {
		return err
	}
	s.mu.file = f
	s.configWatchers.notify()
	return nil
}
