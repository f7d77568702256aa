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
// * Broker resources ("" for the cluster default, else any broker id):
//   SET, DELETE and, for list settings (log.cleanup.policy), APPEND and
//   SUBTRACT of the dynamic broker configs (dynamic_broker_config.go: the
//   log cleaner's, the replication throttle rates, the log.* topic
//   defaults), on top of the entity's stored configs, stored in the
//   coordinator as Kafka's /config/brokers/<entity> and applied by every
//   broker it concerns; a setting that is not dynamic is INVALID_REQUEST
//   ("Cannot update these configs dynamically"), APPEND/SUBTRACT of
//   another is INVALID_CONFIG. SET of a TLS listener's store settings to
//   their current values, on this broker's own resource, reloads its
//   certificates (ssl_reload.go).
// * Group resources (GROUP, 32; any group id, existing or not): SET and
//   DELETE of Kafka 4.2's group configs (group_config.go) on top of the
//   group's stored ones, checked as Kafka's GroupConfig.validate (an
//   unknown name, a bad value, a value beyond the broker's
//   group.*.min/max setting, a heartbeat interval not below the session
//   timeout: INVALID_CONFIG; APPEND/SUBTRACT: INVALID_CONFIG), stored in
//   the coordinator as /config/groups/<id> and followed by every broker.
// * Authorization (with an authorizer, as Kafka): ALTER_CONFIGS on the
//   topic (TOPIC_AUTHORIZATION_FAILED), the group
//   (GROUP_AUTHORIZATION_FAILED) or, for a broker (the TLS store
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
			err = s.alterBrokerConfigs(rr.ResourceName, incrementalOps(rr.Configs), false, req.ValidateOnly)
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			err = s.alterGroupConfigs(rr.ResourceName, incrementalOps(rr.Configs), false, req.ValidateOnly)
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

// incrementalOps are IncrementalAlterConfigs' configs as changes.
func incrementalOps(cfgs []kmsg.IncrementalAlterConfigsRequestResourceConfig) []brokerConfigOp {
	var ops []brokerConfigOp
	for _, c := range cfgs {
		ops = append(ops, brokerConfigOp{name: c.Name, op: c.Op, value: c.Value})
	}
	return ops
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
				cur = s.topicDefaults()[c.Name]
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
