package coord

import (
	"context"
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

// AlterScramCredentials implements ScramStore: one AlterEntityConfig of
// the user's config (the file replaced atomically before it returns).
func (ss *LocalSession) AlterScramCredentials(ctx context.Context, user string, alt ScramAlteration) error {
	if err := validateAlteration(user, alt); err != nil {
		return err
	}
	return ss.alterEntity(ctx, EntityUsers, user, func(cur map[string]string) (map[string]string, error) {
		return applyAlteration(cur, alt)
	})
}
