package broker

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Dynamic broker configs: the broker settings the registry marks
// dynamicBroker (the log cleaner's, as Kafka's
// LogCleaner.reconfigurableConfigs) change at run time through
// IncrementalAlterConfigs (SET, DELETE) and AlterConfigs (the settings
// not named go back to the properties file's values) on this broker's
// resource, as Kafka's DynamicBrokerConfig.
//
//   - A value is checked by its registry entry (INVALID_CONFIG, Kafka's
//     "Invalid config value for resource"), then the whole new
//     configuration by its owner (logCleaner.validateReconfiguration),
//     then applied at once (logCleaner.reconfigure); ValidateOnly checks
//     only.
//   - A run-time value is kept in memory only, as the replication
//     throttle rates are (replication_throttle.go): after a restart the
//     properties file's value (or the default) applies again.
//   - DescribeConfigs reports these settings as not read-only, a
//     run-time value with source DYNAMIC_BROKER_CONFIG and the static
//     value as its next synonym.

// dynamicBrokerConfig holds the dynamic broker configs set at run time.
type dynamicBrokerConfig struct {
	mu sync.Mutex
	// values are the run-time values by setting name (trimmed).
	values map[string]string
}

// dynamicBrokerChange is one broker resource's changes of dynamic broker
// configs.
type dynamicBrokerChange struct {
	set map[string]string
	del []string
	// replace drops every run-time value not in set (AlterConfigs).
	replace bool
}

// isDynamicBrokerSetting says key is a broker setting changeable at run
// time through the generic path (the replication throttle rates and TLS
// store reloads have their own).
func isDynamicBrokerSetting(key string) bool {
	s := brokerSettingByName[key]
	return s != nil && s.dynamicBroker
}

// addSet records a SET of key; a null value is INVALID_CONFIG.
func (ch *dynamicBrokerChange) addSet(key string, v *string) error {
	if v == nil {
		return newKafkaError(kerr.InvalidConfig, "Invalid config value for resource broker config %s: null value", key)
	}
	if ch.set == nil {
		ch.set = map[string]string{}
	}
	ch.set[key] = strings.TrimSpace(*v)
	return nil
}

// alterDynamicBroker checks ch and, unless validateOnly, applies it.
func (s *Server) alterDynamicBroker(ch dynamicBrokerChange, validateOnly bool) error {
	d := &s.dynCfg
	d.mu.Lock()
	defer d.mu.Unlock()
	next := map[string]string{}
	if !ch.replace {
		maps.Copy(next, d.values)
	}
	for _, k := range ch.del {
		delete(next, k)
	}
	for k, v := range ch.set {
		if err := brokerSettingByName[k].validate(v); err != nil {
			return newKafkaError(kerr.InvalidConfig, "Invalid config value for resource broker config %s: %v", k, err)
		}
		next[k] = v
	}
	if maps.Equal(next, d.values) {
		return nil
	}
	cfg, err := s.configWithDynamic(next)
	if err != nil {
		return newKafkaError(kerr.InvalidConfig, "Invalid config value for resource broker: %v", err)
	}
	if s.cleaner != nil {
		if err := s.cleaner.validateReconfiguration(cfg.Cleaner); err != nil {
			return newKafkaError(kerr.InvalidConfig, "Invalid config value for resource broker: %v", err)
		}
	}
	if validateOnly {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(next)) {
		if d.values[k] != next[k] {
			s.log.Info("dynamic broker config set at run time (not persisted)", "config", k, "value", next[k])
		}
	}
	for k := range d.values {
		if _, ok := next[k]; !ok {
			s.log.Info("dynamic broker config set back to the properties file's", "config", k)
		}
	}
	d.values = next
	if s.cleaner != nil {
		s.cleaner.reconfigure(cfg.Cleaner)
	}
	if s.tier != nil && s.tier.cleanLimiter != nil {
		s.tier.cleanLimiter.SetLimit(cleanerRate(cfg.Cleaner))
	}
	return nil
}

// configWithDynamic is the broker's configuration with the run-time
// values in values applied over the properties file's.
func (s *Server) configWithDynamic(values map[string]string) (Config, error) {
	cfg := s.cfg
	cfg.TopicDefaults = maps.Clone(s.cfg.TopicDefaults) // no dynamic broker config is a topic default, but never alias
	for k, v := range values {
		st := brokerSettingByName[k]
		if st == nil || !st.dynamicBroker || st.topic != "" {
			return Config{}, fmt.Errorf("%s is not a dynamic broker config", k)
		}
		if err := st.apply(&cfg, v); err != nil {
			return Config{}, fmt.Errorf("%s: %w", k, err)
		}
	}
	return cfg, nil
}

// withDynamicBrokerConfigs marks the dynamic broker configs of a broker
// DescribeConfigs answer as changeable, with the run-time values where
// set.
func (s *Server) withDynamicBrokerConfigs(entries []configEntry) []configEntry {
	d := &s.dynCfg
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range entries {
		e := &entries[i]
		if !isDynamicBrokerSetting(e.name) {
			continue
		}
		e.readOnly = false
		if v, ok := d.values[e.name]; ok {
			e.value, e.source = v, kmsg.ConfigSourceDynamicBrokerConfig
			e.synonyms = append([]configSynonym{{name: e.name, value: e.value, source: e.source}}, e.synonyms...)
		}
	}
	return entries
}
