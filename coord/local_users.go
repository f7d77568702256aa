package coord

import (
	"context"
	"fmt"
	"maps"
)

// The embedded coordinator keeps users' configs in its file
// (localFile.Users: user to config key to value, the SCRAM credentials
// among them), written with mode 0600 like the rest of the file.

// ScramCredential implements ScramStore.
func (ss *LocalSession) ScramCredential(user, mechanism string) (string, bool) {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if !isScramMechanism(mechanism) {
		return "", false
	}
	c, ok := s.mu.file.Users[user][mechanism]
	return c, ok
}

// ScramUsers implements ScramStore.
func (ss *LocalSession) ScramUsers() map[string]map[string]string {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[string]string{}
	for u, cfg := range s.mu.file.Users {
		if m := scramOnly(cfg); m != nil {
			out[u] = m
		}
	}
	return out
}

// AlterScramCredentials implements ScramStore: the file is replaced
// atomically with the new user configs before it returns.
func (ss *LocalSession) AlterScramCredentials(ctx context.Context, user string, alt ScramAlteration) error {
	if err := validateAlteration(user, alt); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("coord: alter SCRAM credentials: %w", err)
	}
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.checkLocked(); err != nil {
		return err
	}
	cfg, err := applyAlteration(s.mu.file.Users[user], alt)
	if err != nil {
		return err
	}
	f := s.mu.file
	f.Users = maps.Clone(s.mu.file.Users)
	if f.Users == nil {
		f.Users = map[string]map[string]string{}
	}
	if cfg == nil {
		delete(f.Users, user)
	} else {
		f.Users[user] = cfg
	}
	if len(f.Users) == 0 {
		f.Users = nil
	}
	if err := s.persistLocked(&f, s.mu.topics); err != nil {
		return err
	}
	s.mu.file = f
	return nil
}
