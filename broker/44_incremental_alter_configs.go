package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs: v0-1
//
// Behavior:
// * Topic resources: each config is changed by its operation on top of the
//   topic's current overrides: SET (validated, INVALID_CONFIG), DELETE
//   (back to the default), APPEND and SUBTRACT (list configs only:
//   cleanup.policy; others are INVALID_CONFIG). The result is validated as a
//   whole, persisted in the coordinator and applied live, as AlterConfigs.
//   Unknown topics are UNKNOWN_TOPIC_OR_PARTITION. __consumer_offsets keeps
//   unlimited retention, as in AlterConfigs.
// * A config the settings registry does not mark dynamic is INVALID_CONFIG
//   (every topic config is dynamic so far).
// * A config named twice in one resource, or an unknown operation, is
//   INVALID_REQUEST.
// * ValidateOnly checks and changes nothing.
// * Broker resources: SET or DELETE of leader.replication.throttled.rate
//   and follower.replication.throttled.rate (replication_throttle.go: kept
//   in memory, not persisted; DELETE goes back to the properties file's
//   value; APPEND/SUBTRACT are INVALID_CONFIG), SET or DELETE of the
//   dynamic broker configs (the log cleaner's log.cleaner.threads,
//   log.cleaner.dedupe.buffer.size, log.cleaner.io.buffer.load.factor,
//   log.cleaner.io.buffer.size, log.cleaner.io.max.bytes.per.second,
//   log.cleaner.backoff.ms; dynamic_broker_config.go: validated,
//   applied at once, kept in memory only), and SET of a TLS
//   listener's store settings to their current values, which reloads its
//   certificates (ssl_reload.go); any other change is INVALID_REQUEST, as
//   in AlterConfigs.
// * Authorization (with an authorizer, as Kafka): ALTER_CONFIGS on the
//   topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker (the TLS store
//   reload), on the cluster (CLUSTER_AUTHORIZATION_FAILED), each resource
//   on its own.
//
// Version notes:
// * v1: flexible versions

func init() { register(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := s.configResourceDenied(r, acl.OpAlterConfigs, rr.ResourceType, rr.ResourceName)
		switch {
		case err != nil:
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			err = s.incrementalAlterTopic(rr, req.ValidateOnly)
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			if err = brokerResourceName(s, rr.ResourceName); err == nil {
				configs := map[string]*string{}
				var ops []throttleRateOp
				var dyn dynamicBrokerChange
				seen := map[string]bool{}
				for _, c := range rr.Configs {
					if seen[c.Name] {
						err = newKafkaError(kerr.InvalidRequest, "broker config %s is given twice", c.Name)
						break
					}
					seen[c.Name] = true
					if isThrottleRate(c.Name) {
						if c.Op != kmsg.IncrementalAlterConfigOpSet && c.Op != kmsg.IncrementalAlterConfigOpDelete {
							err = newKafkaError(kerr.InvalidConfig, "broker config %s: only SET and DELETE apply to a number", c.Name)
							break
						}
						op, perr := parseThrottleRate(c.Name, c.Value, c.Op == kmsg.IncrementalAlterConfigOpDelete)
						if perr != nil {
							err = perr
							break
						}
						ops = append(ops, op)
						continue
					}
					if isDynamicBrokerSetting(c.Name) {
						switch c.Op {
						case kmsg.IncrementalAlterConfigOpSet:
							err = dyn.addSet(c.Name, c.Value)
						case kmsg.IncrementalAlterConfigOpDelete:
							dyn.del = append(dyn.del, c.Name)
						default:
							err = newKafkaError(kerr.InvalidConfig, "broker config %s: only SET and DELETE apply to a value that is not a list", c.Name)
						}
						if err != nil {
							break
						}
						continue
					}
					if c.Op != kmsg.IncrementalAlterConfigOpSet {
						err = newKafkaError(kerr.InvalidRequest, "broker config %s: only SET of a TLS listener's store settings, and SET or DELETE of leader/follower.replication.throttled.rate and of the dynamic broker configs, are served at run time", c.Name)
						break
					}
					configs[c.Name] = c.Value
				}
				if err == nil {
					err = s.alterDynamicBroker(dyn, true /* validateOnly */)
				}
				if err == nil && len(configs) > 0 {
					err = s.reloadSSL(configs, req.ValidateOnly)
				}
				if err == nil && !req.ValidateOnly {
					s.applyThrottleRates(ops)
					err = s.alterDynamicBroker(dyn, false)
				}
			}
		default:
			err = brokerResourceError(s, rr.ResourceType, rr.ResourceName)
		}
		if err != nil {
			code, msg := errorCode(err)
			sr.ErrorCode, sr.ErrorMessage = code, &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return reply{msg: resp}, nil
}

func (s *Server) incrementalAlterTopic(rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	t := s.topic(rr.ResourceName)
	if t == nil {
		return newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist", rr.ResourceName)
	}
	seen := map[string]bool{}
	for _, c := range rr.Configs {
		if seen[c.Name] {
			return newKafkaError(kerr.InvalidRequest, "error due to duplicate config keys: %s", c.Name)
		}
		seen[c.Name] = true
	}
	next := maps.Clone(t.overrides)
	if next == nil {
		next = map[string]string{}
	}
	for _, c := range rr.Configs {
		def, ok := topicSettingByName[c.Name]
		if !ok {
			return newKafkaError(kerr.InvalidConfig, "unknown topic config %q", c.Name)
		}
		if err := checkTopicConfigDynamic(c.Name); err != nil {
			return newKafkaError(kerr.InvalidConfig, "%v", err)
		}
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if err := checkTopicConfig(c.Name, c.Value); err != nil {
				return newKafkaError(kerr.InvalidConfig, "%v", err)
			}
			next[c.Name] = *c.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, c.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if def.typ != typeList {
				return newKafkaError(kerr.InvalidConfig, "config value append or subtract is not allowed for config key %s, which is not a list", c.Name)
			}
			if c.Value == nil {
				return newKafkaError(kerr.InvalidConfig, "topic config %q: null value", c.Name)
			}
			cur, ok := next[c.Name]
			if !ok {
				cur = s.cfg.TopicDefaults[c.Name]
			}
			list := splitList(cur)
			for _, v := range splitList(*c.Value) {
				i := slices.Index(list, v)
				if c.Op == kmsg.IncrementalAlterConfigOpAppend && i < 0 {
					list = append(list, v)
				} else if c.Op == kmsg.IncrementalAlterConfigOpSubtract && i >= 0 {
					list = slices.Delete(list, i, i+1)
				}
			}
			v := strings.Join(list, ",")
			if err := checkTopicConfig(c.Name, &v); err != nil {
				return newKafkaError(kerr.InvalidConfig, "%v", err)
			}
			next[c.Name] = v
		default:
			return newKafkaError(kerr.InvalidRequest, "unknown config operation %d for %s", c.Op, c.Name)
		}
	}
	return s.setTopicConfig(rr.ResourceName, next, validateOnly)
}
