package coord

import (
	"context"
)

// Users' SCRAM credentials in ZooKeeper: the config keys SCRAM-SHA-256
// and SCRAM-SHA-512 of the users entities (/config/users/<url-encoded
// user>), kept by the shared entity config cache and watch (zk_config.go).

// ScramCredential implements ScramStore.
func (z *ZK) ScramCredential(user, mechanism string) (string, bool) {
	if !isScramMechanism(mechanism) {
		return "", false
	}
	c, ok := z.configs.entities(EntityUsers)[SanitizeUser(user)][mechanism]
	return c, ok
}

// ScramUsers implements ScramStore.
func (z *ZK) ScramUsers() map[string]map[string]string {
	out := map[string]map[string]string{}
	for n, cfg := range z.configs.entities(EntityUsers) {
		m := scramOnly(cfg)
		if m == nil {
			continue
		}
		user, err := DesanitizeUser(n)
		if err != nil {
			z.log.Warn("coord: user config znode with a name that is not URL-encoded; skipped", "znode", n)
			continue
		}
		out[user] = m
	}
	return out
}

// AlterScramCredentials implements ScramStore: one compare-and-set write
// of the user's entity config with its change notification
// (AlterEntityConfig); the user's other configs (quotas) are kept.
func (z *ZK) AlterScramCredentials(ctx context.Context, user string, alt ScramAlteration) error {
	if err := validateAlteration(user, alt); err != nil {
		return err
	}
	return z.AlterEntityConfig(ctx, EntityUsers, SanitizeUser(user), func(cur map[string]string) (map[string]string, error) {
		return applyAlteration(cur, alt)
	})
}
