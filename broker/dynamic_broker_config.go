package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Dynamic broker configs, as Kafka's DynamicBrokerConfig in ZooKeeper
// mode: the broker settings the registry marks dynamicBroker change at
// run time through IncrementalAlterConfigs and AlterConfigs on a broker
// resource, and are stored in the coordinator as Kafka stores them:
// /config/brokers/<default> (the resource named "": every broker) and
// /config/brokers/<id> (one broker, any id, live or not), each write with
// its /config/changes notification (coord.EntityConfigStore). Every
// broker watches them and applies what concerns it; at start it reads
// them before it serves.
//
//   - Precedence, strongest first: this broker's own entity
//     (DYNAMIC_BROKER_CONFIG), the default entity
//     (DYNAMIC_DEFAULT_BROKER_CONFIG), the properties file
//     (STATIC_BROKER_CONFIG), the default (DEFAULT_CONFIG).
//     DescribeConfigs lists the synonyms in that order (Kafka's
//     configSynonyms).
//   - The dynamic settings are those Kafka 3.9 marks dynamic that Strata
//     implements: the log cleaner's (LogCleaner.reconfigurableConfigs,
//     applied by logCleaner.reconfigure), the replication throttle rates
//     (replica.Manager.SetThrottledRates), the remote fetch quota
//     (remote.log.manager.fetch.max.bytes.per.second,
//     fetch_remote_quota.go) and the log.* defaults of topic
//     configs (DynamicLogConfig: every topic without an override takes
//     the new value at once).
//   - An alter is checked as Kafka checks it: a setting that is not
//     dynamic is INVALID_REQUEST ("Cannot update these configs
//     dynamically: Set(...)"), a TLS store setting of the default entity
//     INVALID_REQUEST ("Cannot update these configs at default cluster
//     level, broker id must be specified"), a bad value INVALID_CONFIG;
//     then the whole new configuration of this broker (cleaner, topic
//     defaults); ValidateOnly stops there.
//   - A stored value this broker cannot use (an unknown or non-dynamic
//     key, a bad value, written by a Kafka tool or another version) is
//     logged and left out.

// dynamicBrokerConfig holds the dynamic broker configs in force.
type dynamicBrokerConfig struct {
	mu sync.Mutex
	// defaults and own are the usable values of /config/brokers/<default>
	// and of this broker's entity.
	defaults, own map[string]string
	// topicDefaults are the topic configs' broker defaults in force:
	// the properties file's with the dynamic log.* values applied.
	topicDefaults atomic.Pointer[map[string]string]
	// gen counts changes of topicDefaults (applySnapshot re-resolves the
	// topics' configs when it moves).
	gen atomic.Uint64
	// loaded says the configs were read at start.
	loaded bool
}

// isDynamicBrokerSetting says key is a broker setting changeable at run
// time (the TLS store reloads have their own path, ssl_reload.go).
func isDynamicBrokerSetting(key string) bool {
	s := brokerSettingByName[key]
	return s != nil && s.dynamicBroker
}

// topicDefaults are the topic configs' broker defaults in force.
func (s *Server) topicDefaults() map[string]string {
	if p := s.dynCfg.topicDefaults.Load(); p != nil {
		return *p
	}
	return s.cfg.TopicDefaults
}

// brokerConfigOp is one change of a broker config: IncrementalAlterConfigs'
// operations; AlterConfigs gives SETs with replace.
type brokerConfigOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

// brokerEntity is the coordinator entity of a broker resource name: ""
// is the cluster default, else a broker id (any, live or not).
func brokerEntity(name string) (string, error) {
	if name == "" {
		return coord.DefaultEntity, nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != name {
		return "", newKafkaError(kerr.InvalidRequest, "broker id must be a non-negative integer or empty, but received %s", name)
	}
	return name, nil
}

// scalaSet renders names as Kafka's messages do (a Scala Set).
func scalaSet(names []string) string {
	slices.Sort(names)
	return "Set(" + strings.Join(names, ", ") + ")"
}

// alterBrokerConfigs applies one broker resource's changes: the TLS store
// reloads (this broker's resource only), then the dynamic configs,
// checked as a whole and written to the coordinator (unless
// validateOnly). replace (AlterConfigs) drops the entity's configs not
// set.
func (s *Server) alterBrokerConfigs(resource string, ops []brokerConfigOp, replace, validateOnly bool) error {
	entity, err := brokerEntity(resource)
	if err != nil {
		return err
	}
	self := strconv.Itoa(int(s.cfg.BrokerID))
	seen := map[string]bool{}
	ssl := map[string]*string{}
	var dyn []brokerConfigOp
	var nonDynamic, perBroker []string
	for _, c := range ops {
		if seen[c.name] {
			return newKafkaError(kerr.InvalidRequest, "error due to duplicate config keys: %s", c.name)
		}
		seen[c.name] = true
		switch c.op {
		case kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete, kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		default:
			return newKafkaError(kerr.InvalidRequest, "unknown config operation %d for %s", c.op, c.name)
		}
		if _, rest, _, ok := perListenerSetting(c.name); ok && slices.Contains(sslReloadKeys, rest) {
			if entity == coord.DefaultEntity {
				perBroker = append(perBroker, c.name)
				continue
			}
			if c.op != kmsg.IncrementalAlterConfigOpSet {
				return newKafkaError(kerr.InvalidRequest, "broker config %s: only SET to the current value (a reload of the certificates) is served", c.name)
			}
			ssl[c.name] = c.value
			continue
		}
		if !isDynamicBrokerSetting(c.name) { // unknown names too
			nonDynamic = append(nonDynamic, c.name)
			continue
		}
		dyn = append(dyn, c)
	}
	if len(perBroker) > 0 {
		return newKafkaError(kerr.InvalidRequest, "Cannot update these configs at default cluster level, broker id must be specified: %s", scalaSet(perBroker))
	}
	if len(nonDynamic) > 0 {
		return newKafkaError(kerr.InvalidRequest, "Cannot update these configs dynamically: %s", scalaSet(nonDynamic))
	}
	if len(ssl) > 0 && entity != self {
		return newKafkaError(kerr.InvalidRequest, "a TLS listener's certificates are reloaded by the broker itself: send the request to broker %s", entity)
	}
	// The new entity config, from the current one.
	next := func(cur map[string]string) (map[string]string, error) {
		out := map[string]string{}
		if !replace {
			maps.Copy(out, cur)
		}
		for _, c := range dyn {
			st := brokerSettingByName[c.name]
			switch c.op {
			case kmsg.IncrementalAlterConfigOpSet:
				if c.value == nil {
					return nil, newKafkaError(kerr.InvalidConfig, "Invalid config value for resource broker config %s: null value", c.name)
				}
				out[c.name] = strings.TrimSpace(*c.value)
			case kmsg.IncrementalAlterConfigOpDelete:
				delete(out, c.name)
			default: // APPEND, SUBTRACT: list settings only, as Kafka
				if st.typ != typeList {
					return nil, newKafkaError(kerr.InvalidConfig, "Config value append is not allowed for config key: %s", c.name)
				}
				if c.value == nil {
					return nil, newKafkaError(kerr.InvalidConfig, "Invalid config value for resource broker config %s: null value", c.name)
				}
				v, ok := out[c.name]
				if !ok {
					v = s.effectiveBrokerValue(c.name, entity)
				}
				list := splitList(v)
				for _, x := range splitList(*c.value) {
					i := slices.Index(list, x)
					if c.op == kmsg.IncrementalAlterConfigOpAppend && i < 0 {
						list = append(list, x)
					} else if c.op == kmsg.IncrementalAlterConfigOpSubtract && i >= 0 {
						list = slices.Delete(list, i, i+1)
					}
				}
				out[c.name] = strings.Join(list, ",")
			}
		}
		for _, c := range dyn {
			if v, ok := out[c.name]; ok {
				if err := brokerSettingByName[c.name].validate(v); err != nil {
					return nil, newKafkaError(kerr.InvalidConfig, "Invalid config value for resource broker config %s: %v", c.name, err)
				}
			}
		}
		if err := s.checkDynamicBroker(entity, out); err != nil {
			return nil, err
		}
		if len(out) == 0 {
			return nil, nil
		}
		return out, nil
	}
	if len(dyn) > 0 || replace {
		if validateOnly {
			if _, err := next(s.coord.EntityConfigs(coord.EntityBrokers)[entity]); err != nil {
				return err
			}
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
			defer cancel()
			err := s.coord.AlterEntityConfig(ctx, coord.EntityBrokers, entity, next)
			var ke *kafkaError
			if errors.As(err, &ke) {
				return err
			}
			if err != nil {
				return coordError(err, "write the dynamic broker configs")
			}
			s.log.Info("dynamic broker configs written", "entity", entity, "configs", len(dyn))
			s.loadDynamicBrokerConfigs() // read-your-writes; the watch brings the same
		}
	}
	if len(ssl) > 0 {
		return s.reloadSSL(ssl, validateOnly)
	}
	return nil
}

// effectiveBrokerValue is a dynamic setting's value in force for entity
// below the entity itself: the default entity's (for a broker's), else
// the properties file's or the default.
func (s *Server) effectiveBrokerValue(name, entity string) string {
	if entity != coord.DefaultEntity {
		if v, ok := s.coord.EntityConfigs(coord.EntityBrokers)[coord.DefaultEntity][name]; ok {
			return v
		}
	}
	v, _ := brokerSettingByName[name].current(&s.cfg)
	return v
}

// checkDynamicBroker checks the configuration this broker would run with
// if entity's config were cfg (entities of other brokers only by their
// values, which the caller checked).
func (s *Server) checkDynamicBroker(entity string, cfg map[string]string) error {
	self := strconv.Itoa(int(s.cfg.BrokerID))
	if entity != self && entity != coord.DefaultEntity {
		return nil
	}
	ents := s.coord.EntityConfigs(coord.EntityBrokers)
	ents[entity] = cfg
	values := mergeDynamic(s.usableDynamic(ents[coord.DefaultEntity], false), s.usableDynamic(ents[self], false))
	next, err := s.configWithDynamic(values)
	if err != nil {
		return newKafkaError(kerr.InvalidConfig, "Invalid config value for resource broker: %v", err)
	}
	if s.cleaner != nil && next.Cleaner != s.cleaner.config() {
		if err := s.cleaner.validateReconfiguration(next.Cleaner); err != nil {
			return newKafkaError(kerr.InvalidConfig, "Invalid config value for resource broker: %v", err)
		}
	}
	if _, err := resolveTopicConfig(next.TopicDefaults, nil); err != nil {
		return newKafkaError(kerr.InvalidConfig, "Invalid config value for resource broker: %v", err)
	}
	return nil
}

// usableDynamic keeps the entries of a stored entity config this broker
// can apply; with logIt, the others are logged.
func (s *Server) usableDynamic(m map[string]string, logIt bool) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		st := brokerSettingByName[k]
		switch {
		case st == nil || !st.dynamicBroker:
			if logIt {
				s.log.Warn("stored dynamic broker config ignored: not a setting Strata changes at run time", "config", k)
			}
		case st.validate(v) != nil:
			if logIt {
				s.log.Warn("stored dynamic broker config ignored: bad value", "config", k, "err", st.validate(v))
			}
		default:
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// mergeDynamic is own over defaults.
func mergeDynamic(defaults, own map[string]string) map[string]string {
	out := maps.Clone(defaults)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, own)
	return out
}

// loadDynamicBrokerConfigs reads the dynamic broker configs from the
// coordinator's cache and applies what changed: at start (before the
// cleaner runs and the topics open) and after every change notification.
func (s *Server) loadDynamicBrokerConfigs() {
	if s.applyDynamicBrokerConfigs() {
		s.applySnapshot(s.coord.Snapshot()) // the topics take the new defaults
	}
}

// applyDynamicBrokerConfigs is loadDynamicBrokerConfigs but for the
// topics: it says whether the topic defaults changed after start.
func (s *Server) applyDynamicBrokerConfigs() (topicDefaultsChanged bool) {
	ents := s.coord.EntityConfigs(coord.EntityBrokers)
	self := strconv.Itoa(int(s.cfg.BrokerID))
	d := &s.dynCfg
	d.mu.Lock()
	defer d.mu.Unlock()
	defaults, own := ents[coord.DefaultEntity], ents[self]
	if d.loaded && maps.Equal(defaults, d.defaults) && maps.Equal(own, d.own) {
		return false
	}
	startup := !d.loaded
	prev := mergeDynamic(d.defaults, d.own)
	values := mergeDynamic(s.usableDynamic(defaults, true), s.usableDynamic(own, true))
	cfg, err := s.configWithDynamic(values)
	if err != nil { // checked by usableDynamic: only a bug gets here
		s.log.Error("dynamic broker configs not applied", "err", err)
		return false
	}
	if s.cleaner != nil && cfg.Cleaner != s.cleaner.config() {
		cur := s.cleaner.config()
		next := cfg.Cleaner
		next.Enable = cur.Enable
		if _, err := cleanerMapSize(next); err != nil {
			s.log.Error("dynamic log cleaner configs not applied", "err", err)
		} else if startup {
			s.cleaner.initialConfig(next)
		} else if err := s.cleaner.validateReconfiguration(next); err != nil {
			s.log.Error("dynamic log cleaner configs not applied", "err", err)
		} else {
			s.cleaner.reconfigure(next)
		}
	}
	if s.tier != nil && s.tier.cleanLimiter != nil {
		s.tier.cleanLimiter.SetLimit(cleanerRate(cfg.Cleaner))
	}
	if s.repl != nil {
		s.repl.SetThrottledRates(cfg.LeaderReplicationThrottledRate, cfg.FollowerReplicationThrottledRate)
	}
	if s.tier != nil {
		s.tier.quota.set(remoteFetchRate(cfg.Tiering.RemoteFetch.MaxBytesPerSecond, runtime.NumCPU()))
	}
	if !maps.Equal(cfg.TopicDefaults, s.topicDefaults()) {
		td := cfg.TopicDefaults
		d.topicDefaults.Store(&td)
		d.gen.Add(1)
		topicDefaultsChanged = !startup
	}
	d.defaults, d.own, d.loaded = maps.Clone(defaults), maps.Clone(own), true
	for _, k := range slices.Sorted(maps.Keys(values)) {
		if prev[k] != values[k] || startup {
			s.log.Info("dynamic broker config in force", "config", k, "value", values[k])
		}
	}
	for k := range prev {
		if _, ok := values[k]; !ok {
			s.log.Info("dynamic broker config removed: the properties file's value applies", "config", k)
		}
	}
	return topicDefaultsChanged
}

// followEntityConfigs runs load now and after every change of the
// coordinator's entity configs, until the server closes (the watch is set
// first, so that no change is missed).
func (s *Server) followEntityConfigs(load func()) {
	ch, stop := s.coord.WatchEntityConfigs()
	load()
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		defer stop()
		for {
			select {
			case <-s.closed:
				return
			case <-ch:
				load()
			}
		}
	}()
}

// configWithDynamic is the broker's configuration with the dynamic
// values applied over the properties file's.
func (s *Server) configWithDynamic(values map[string]string) (Config, error) {
	cfg := s.cfg
	cfg.TopicDefaults = maps.Clone(s.cfg.TopicDefaults)
	for k, v := range values {
		st := brokerSettingByName[k]
		if st == nil || !st.dynamicBroker {
			return Config{}, fmt.Errorf("%s is not a dynamic broker config", k)
		}
		if err := st.apply(&cfg, v); err != nil {
			return Config{}, fmt.Errorf("%s: %w", k, err)
		}
	}
	return cfg, nil
}

// dynamicSynonyms are a setting's synonyms from the dynamic configs,
// strongest first: this broker's entity (perBroker only), then the
// default entity; names are the setting's broker names (brokerNames).
func (s *Server) dynamicSynonyms(st *setting, perBroker bool) []configSynonym {
	d := &s.dynCfg
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []configSynonym
	names := st.brokerNames()
	if perBroker {
		for _, n := range names {
			if v, ok := d.own[n]; ok && isDynamicBrokerSetting(n) {
				out = append(out, configSynonym{name: n, value: strings.TrimSpace(v), source: kmsg.ConfigSourceDynamicBrokerConfig})
			}
		}
	}
	for _, n := range names {
		if v, ok := d.defaults[n]; ok && isDynamicBrokerSetting(n) {
			out = append(out, configSynonym{name: n, value: strings.TrimSpace(v), source: kmsg.ConfigSourceDynamicDefaultBrokerConfig})
		}
	}
	return out
}

// describeBrokerEntries is the DescribeConfigs answer of a broker
// resource: this broker's (every setting with its value in force and its
// synonyms) or, for the default resource, the dynamic defaults only, with
// their synonyms but this broker's own, as Kafka.
func (s *Server) describeBrokerEntries(perBroker bool) []configEntry {
	var out []configEntry
	for _, e := range s.cfg.brokerConfigEntries() {
		st := brokerSettingByName[e.name]
		if st == nil { // a per-listener setting
			if perBroker {
				out = append(out, e)
			}
			continue
		}
		dyn := s.dynamicSynonyms(st, perBroker)
		if st.dynamicBroker {
			e.readOnly = false
		}
		if !perBroker && (len(dyn) == 0 || dyn[0].name != st.name) {
			continue // the default resource: only the dynamic defaults
		}
		if len(dyn) > 0 {
			e.value, e.source = dyn[0].value, dyn[0].source
		}
		e.synonyms = append(dyn, e.synonyms...)
		out = append(out, e)
	}
	return out
}

// topicConfigEntries describes a topic's configs with the topic defaults
// and the dynamic broker configs in force.
func (s *Server) topicConfigEntries(overrides map[string]string) []configEntry {
	return s.cfg.topicConfigEntries(overrides, s.topicDefaults(), func(st *setting) []configSynonym { return s.dynamicSynonyms(st, true) })
}
