package broker

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Reloading TLS certificates by an admin call, Kafka's dynamic SSL update
// in the form Strata serves: IncrementalAlterConfigs (or AlterConfigs) on
// this broker's resource, SET of listener.name.<l>.ssl.keystore.location
// (or another of the listener's store settings) to the value it has
// makes the listener read its keystore and truststore files again, as
// Kafka does for a keystore updated in place. New connections get the
// new certificates; a store that does not load or fails the reload checks
// (tlsconfig: an expired certificate, another subject) is refused with
// INVALID_CONFIG and the old one stays. Giving another value is refused:
// settings are read from the properties file at start, so point it at
// the new files and restart, or replace the files in place (the broker
// also reloads them by itself, strata.ssl.reload.check.interval.ms).

// sslReloadKeys are the settings whose SET reloads the stores.
var sslReloadKeys = []string{
	"ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
	"ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
}

// reloadSSL handles the configs of an alter on the broker resource: each
// must be a SET of a store setting of a TLS listener to its current
// value; then (unless validateOnly) those listeners reload.
func (s *Server) reloadSSL(configs map[string]*string, validateOnly bool) error {
	var targets []*listener
	for k, v := range configs {
		name, rest, _, ok := perListenerSetting(k)
		if !ok || !slices.Contains(sslReloadKeys, rest) {
			return newKafkaError(kerr.InvalidRequest, "broker config %s cannot be changed at run time; only leader/follower.replication.throttled.rate, and listener.name.<listener>.ssl.keystore.* and ssl.truststore.* (set to their current values, to reload a TLS listener's certificates) can be; set others in the properties file and restart", k)
		}
		l := s.listener(name)
		if l == nil || l.tls == nil {
			return newKafkaError(kerr.InvalidConfig, "%s: there is no TLS listener %s", k, name)
		}
		cur := strings.TrimSpace(s.cfg.ListenerProperties(name)[rest])
		if v == nil || strings.TrimSpace(*v) != cur {
			return newKafkaError(kerr.InvalidConfig, "%s: changing the value at run time is not supported; replace the files in place and set it to its current value, or change the properties file and restart", k)
		}
		if !slices.Contains(targets, l) {
			targets = append(targets, l)
		}
	}
	if validateOnly {
		return nil
	}
	for _, l := range targets {
		if err := l.tls.Reload(); err != nil {
			return newKafkaError(kerr.InvalidConfig, "listener %s: the new certificates were refused, the old ones stay in use: %v", l.name, err)
		}
		s.log.Info("TLS certificates reloaded by an admin request", "listener", l.name, "files", strings.Join(l.tls.Files(), ","))
	}
	return nil
}
