package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat: v0-1
//
// Behavior (group/consumer_heartbeat.go has the details):
// * KIP-848's consumer group protocol: members join (epoch 0), heartbeat
//   with their epoch and owned partitions, and get their assignment,
//   computed by the server-side assignor (uniform or range), one
//   revocation before any reassignment. Leave with epoch -1, a static
//   member's temporary leave with -2.
// * Served when group.coordinator.rebalance.protocols lists consumer;
//   otherwise UNSUPPORTED_VERSION, and clients stay on the classic
//   protocol.
// * Authorization (with an authorizer, as Kafka): READ on the group,
//   else GROUP_AUTHORIZATION_FAILED; DESCRIBE on every subscribed topic
//   name, else TOPIC_AUTHORIZATION_FAILED naming them. The topics a
//   SubscribedTopicRegex matches are filtered by the member's DESCRIBE
//   authorization: one it may not describe is not assigned to it.
// * A classic group with members of the consumer protocol type becomes a
//   consumer group when a member joins with this API, under
//   group.consumer.migration.policy (group/consumer_migration.go).
// * A share group's id (with members or Empty) is GROUP_ID_NOT_FOUND
//   ("not a consumer group"), as Kafka: one id namespace for every
//   group type.
//
// Version notes:
// * v1: SubscribedTopicRegex; the client generates the member id
//   (KIP-1082).

func init() { registerGroupAPI(68, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	fail := func(code int16, msg string) (reply, error) {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return reply{msg: resp}, nil
	}
	if !s.authorize(r, acl.OpRead, acl.Group(req.Group)) {
		return fail(kerr.GroupAuthorizationFailed.Code, "")
	}
	if s.shares != nil && s.shares.Groups.Exists(req.Group) {
		return fail(kerr.GroupIDNotFound.Code, "Group "+req.Group+" is not a consumer group.") // as Kafka: one id namespace for every group type
	}
	if len(req.SubscribedTopicNames) > 0 {
		allowed := s.topicAuthorizer(r, acl.OpDescribe)
		var denied []string
		for _, t := range req.SubscribedTopicNames {
			if !allowed(t) {
				denied = append(denied, t)
			}
		}
		if len(denied) > 0 {
			return fail(kerr.TopicAuthorizationFailed.Code, "Unauthorized topics: "+joinTopicNames(denied))
		}
	}
	return reply{msg: s.groups.ConsumerGroupHeartbeat(group.WithTopicAuthorizer(groupCtx(r), s.regexTopicAuthorizer(r)), req)}, nil
}

// regexTopicAuthorizer is the DESCRIBE check of r's sender on topics, by
// which the coordinator filters what the member's regex resolves to (now
// and when topics change later): a topic the principal may not describe
// is never assigned to it, as Kafka filters resolved regexes.
func (s *Server) regexTopicAuthorizer(r *request) group.TopicAuthorizer {
	principal, host := r.peer()
	a := group.TopicAuthorizer{Principal: principal + "@" + host}
	if authz := s.authz; authz != nil {
		a.MayDescribe = func(topic string) bool { return authz.Authorize(principal, host, acl.OpDescribe, acl.Topic(topic)) }
	}
	return a
}

// joinTopicNames lists topic names as Kafka's error messages do.
func joinTopicNames(names []string) string {
	out := "["
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out + "]"
}
