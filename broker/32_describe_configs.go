package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: v0-4
//
// Behavior:
// * Topic resources: every topic config of the settings registry
//   (settings.go) with its effective value and source: the topic's
//   override (DYNAMIC_TOPIC_CONFIG), a broker setting
//   (STATIC_BROKER_CONFIG) or Kafka's default (DEFAULT_CONFIG); read-only
//   where the registry says it cannot change at run time (none so far).
//   Unknown topics are UNKNOWN_TOPIC_OR_PARTITION.
// * Broker resources: this broker's id describes every broker setting
//   with its value in force, read-only but for the dynamic broker configs
//   (dynamic_broker_config.go), with the source of the strongest of
//   DYNAMIC_BROKER_CONFIG (this broker's /config/brokers/<id>),
//   DYNAMIC_DEFAULT_BROKER_CONFIG (/config/brokers/<default>),
//   STATIC_BROKER_CONFIG (the properties file), DEFAULT_CONFIG; ""
//   describes the cluster defaults (the dynamic default configs only), as
//   Kafka; another broker id is INVALID_REQUEST ("unexpected broker id",
//   Kafka's answer: describe a broker by asking it).
// * Group resources (GROUP, 32; any group id, existing or not): every
//   group config of Kafka 4.2 (group_config.go) with the group's own value
//   (GROUP_CONFIG) or its default (DEFAULT_CONFIG: the broker setting it
//   defaults from, the synonym after the group's); an empty id is
//   INVALID_REQUEST. Other resource types are INVALID_REQUEST.
// * ConfigNames, when not null, selects configs; unknown names are left
//   out, as Kafka does.
// * Synonyms (v1+, when asked) in Kafka's order: the topic override, then
//   each source (dynamic per broker, dynamic default, static, default)
//   with its names (log.retention.ms, log.retention.minutes,
//   log.retention.hours) in turn. Documentation (v3+) when asked.
// * Authorization (with an authorizer, as Kafka): DESCRIBE_CONFIGS on the
//   topic (TOPIC_AUTHORIZATION_FAILED), the group
//   (GROUP_AUTHORIZATION_FAILED) or, for a broker, on the cluster
//   (CLUSTER_AUTHORIZATION_FAILED), each resource on its own.
//
// Version notes:
// * v1: Source, synonyms
// * v3: ConfigType, Documentation
// * v4: flexible versions

func init() { register(32, 0, 4, handleDescribeConfigs) }

func handleDescribeConfigs(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var entries []configEntry
		err := s.configResourceDenied(r, acl.OpDescribeConfigs, rr.ResourceType, rr.ResourceName)
		switch {
		case err != nil:
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			if t := s.topic(rr.ResourceName); t != nil {
				entries = s.topicConfigEntries(t.overrides)
			} else {
				err = newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist", rr.ResourceName)
			}
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(s.cfg.BrokerID)) {
				err = newKafkaError(kerr.InvalidRequest, "unexpected broker id, expected %d or empty string, but received %s", s.cfg.BrokerID, rr.ResourceName)
			} else {
				entries = s.describeBrokerEntries(rr.ResourceName != "")
			}
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			if rr.ResourceName == "" {
				err = newKafkaError(kerr.InvalidRequest, "Group name must not be empty")
			} else {
				entries = s.groupConfigEntries(rr.ResourceName)
			}
		default:
			err = newKafkaError(kerr.InvalidRequest, "unsupported resource type %v", rr.ResourceType)
		}
		if err != nil {
			code, msg := errorCode(err)
			sr.ErrorCode, sr.ErrorMessage = code, &msg
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		want := map[string]bool{}
		for _, n := range rr.ConfigNames {
			want[n] = true
		}
		for _, e := range entries {
			if rr.ConfigNames != nil && !want[e.name] {
				continue
			}
			sr.Configs = append(sr.Configs, describeEntry(req, e))
		}
		if sr.Configs == nil {
			sr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return reply{msg: resp}, nil
}

func describeEntry(req *kmsg.DescribeConfigsRequest, e configEntry) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	v := e.value
	c.Name, c.Value, c.ReadOnly = e.name, &v, e.readOnly
	c.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig
	c.Source = e.source
	c.ConfigType = e.typ
	if e.sensitive {
		c.Value, c.IsSensitive = nil, true
	}
	if req.IncludeSynonyms {
		for _, syn := range e.synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			sv := syn.value
			cs.Name, cs.Value, cs.Source = syn.name, &sv, syn.source
			if e.sensitive {
				cs.Value = nil
			}
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	if req.IncludeDocumentation {
		d := e.doc
		c.Documentation = &d
	}
	return c
}
