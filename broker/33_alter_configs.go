package broker

import (
	"github.com/stratastream/strata/broker/acl"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs: v0-2
//
// Behavior:
// * Topic resources: the topic's overrides are replaced by exactly the
//   configs given (the non-incremental semantics: a config not listed goes
//   back to its default). They are validated (INVALID_CONFIG for unknown
//   names, null or bad values, and for configs the settings registry does
//   not mark dynamic, which keep their values; every topic config is
//   dynamic so far), persisted in the coordinator, and applied to the open
//   partition logs at once (Log.UpdateConfig); produce picks up
//   max.message.bytes, message.timestamp.type and min.insync.replicas with
//   its next request. Unknown topics are UNKNOWN_TOPIC_OR_PARTITION.
// * __consumer_offsets must not be deleted by retention: its
//   cleanup.policy is compact, or retention.ms=-1 and retention.bytes=-1;
//   anything else is INVALID_CONFIG.
// * ValidateOnly checks and changes nothing.
// * Broker resources ("" for the cluster default, else any broker id):
//   the entity's dynamic broker configs (dynamic_broker_config.go) are
//   replaced by exactly those given (the non-incremental semantics: one
//   not named goes back to the default entity's, the properties file's
//   or the default value), stored in the coordinator as Kafka's
//   /config/brokers/<entity>; a setting that is not dynamic is
//   INVALID_REQUEST; setting a TLS listener's store settings to their
//   current values, on this broker's own resource, reloads its
//   certificates (ssl_reload.go).
// * Group resources (GROUP, 32): the group's configs are replaced by
//   exactly those given, validated as in IncrementalAlterConfigs.
//   Other resource types are INVALID_REQUEST.
// * Authorization (with an authorizer, as Kafka): ALTER_CONFIGS on the
//   topic (TOPIC_AUTHORIZATION_FAILED), the group
//   (GROUP_AUTHORIZATION_FAILED) or, for a broker (the TLS store
//   reload), on the cluster (CLUSTER_AUTHORIZATION_FAILED), each resource
//   on its own.
//
// Version notes:
// * v2: flexible versions

func init() { register(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := s.configResourceDenied(r, acl.OpAlterConfigs, rr.ResourceType, rr.ResourceName)
		switch {
		case err != nil:
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			overrides := map[string]string{}
			for _, c := range rr.Configs {
				cerr := checkTopicConfig(c.Name, c.Value)
				if cerr == nil {
					cerr = checkTopicConfigDynamic(c.Name)
				}
				if cerr != nil {
					err = newKafkaError(kerr.InvalidConfig, "%v", cerr)
					break
				}
				overrides[c.Name] = *c.Value
			}
			if t := s.topic(rr.ResourceName); t != nil && err == nil {
				for k, v := range t.overrides {
					if checkTopicConfigDynamic(k) != nil {
						overrides[k] = v // not changeable, so not reset either
					}
				}
			}
			if err == nil {
				err = s.setTopicConfig(rr.ResourceName, overrides, req.ValidateOnly)
			}
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			err = s.alterBrokerConfigs(rr.ResourceName, setOps(rr.Configs), true, req.ValidateOnly)
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			err = s.alterGroupConfigs(rr.ResourceName, setOps(rr.Configs), true, req.ValidateOnly)
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

// brokerResourceError is the answer to altering a resource type that is
// neither a topic nor a broker.
func brokerResourceError(_ *Server, typ kmsg.ConfigResourceType, _ string) error {
	return newKafkaError(kerr.InvalidRequest, "unsupported resource type %v", typ)
}

// setOps are AlterConfigs' configs as SETs.
func setOps(cfgs []kmsg.AlterConfigsRequestResourceConfig) []brokerConfigOp {
	var ops []brokerConfigOp
	for _, c := range cfgs {
		ops = append(ops, brokerConfigOp{name: c.Name, op: kmsg.IncrementalAlterConfigOpSet, value: c.Value})
	}
	return ops
}
