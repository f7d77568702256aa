package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"strconv"

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
// * Broker resources: broker settings come from the properties file and
//   --override; the changes served at run time are
//   leader.replication.throttled.rate and follower.replication.throttled.rate
//   (replication_throttle.go: kept in memory, not persisted; a rate not
//   named goes back to the properties file's value, the non-incremental
//   semantics), the dynamic broker configs (the log cleaner's,
//   dynamic_broker_config.go; likewise, those not named go back to the
//   properties file's values), and setting a TLS listener's store
//   settings to their current values, which reloads its certificates
//   (ssl_reload.go);
//   anything else is INVALID_REQUEST. Other resource types are
//   INVALID_REQUEST.
// * Authorization (with an authorizer, as Kafka): ALTER_CONFIGS on the
//   topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker (the TLS store
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
			if err = brokerResourceName(s, rr.ResourceName); err == nil {
				// The rates not named go back to the properties
				// file's values (the non-incremental semantics).
				configs := map[string]*string{}
				given := map[string]*string{}
				dyn := dynamicBrokerChange{replace: true}
				for _, c := range rr.Configs {
					if isThrottleRate(c.Name) {
						given[c.Name] = c.Value
					} else if isDynamicBrokerSetting(c.Name) {
						if err = dyn.addSet(c.Name, c.Value); err != nil {
							break
						}
					} else {
						configs[c.Name] = c.Value
					}
				}
				var ops []throttleRateOp
				for _, k := range throttleRateKeys {
					if err != nil {
						break
					}
					v, ok := given[k]
					op, perr := parseThrottleRate(k, v, !ok)
					if perr != nil {
						err = perr
						break
					}
					ops = append(ops, op)
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

// brokerResourceName checks a broker resource names this broker (or is
// empty, the broker the request went to).
func brokerResourceName(s *Server, name string) error {
	if name != "" && name != strconv.Itoa(int(s.cfg.BrokerID)) {
		return newKafkaError(kerr.InvalidRequest, "unexpected broker id, expected %d or empty string, but received %s", s.cfg.BrokerID, name)
	}
	return nil
}

// brokerResourceError is the answer to altering anything but a topic.
func brokerResourceError(s *Server, typ kmsg.ConfigResourceType, name string) error {
	if typ != kmsg.ConfigResourceTypeBroker {
		return newKafkaError(kerr.InvalidRequest, "unsupported resource type %v", typ)
	}
	if name != "" && name != strconv.Itoa(int(s.cfg.BrokerID)) {
		return newKafkaError(kerr.InvalidRequest, "unexpected broker id, expected %d or empty string, but received %s", s.cfg.BrokerID, name)
	}
	return newKafkaError(kerr.InvalidRequest, "broker configs cannot be changed at runtime; set them in the properties file or with --override and restart")
}
