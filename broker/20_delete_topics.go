package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-6
//
// Behavior:
// * Deletes the topic in the coordinator first (through a pending-deletion
//   marker, so that a deletion cut short by a crash is finished by the
//   controller), then this broker closes and deletes its logs of the topic
//   before the response leaves; the other brokers delete theirs when their
//   metadata watches fire, or at their next start. Logs are matched by
//   topic ID (partition.metadata), so a topic created again under the same
//   name keeps its new logs.
// * By name (v0-5) or, from v6, by name or by topic ID. An unknown name is
//   UNKNOWN_TOPIC_OR_PARTITION, an unknown ID UNKNOWN_TOPIC_ID, an entry
//   with both or neither INVALID_REQUEST.
// * __consumer_offsets cannot be deleted: INVALID_TOPIC_EXCEPTION.
// * Authorization (with an authorizer, as Kafka): DELETE on the topic, else
//   TOPIC_AUTHORIZATION_FAILED before its existence is checked; by topic
//   ID, a topic the principal may not DESCRIBE is answered without its
//   name.
//
// Version notes:
// * v1: ThrottleMillis
// * v4: flexible versions
// * v5: ErrorMessage
// * v6: topics by ID

func init() { register(20, 0, 6, handleDeleteTopics) }

func handleDeleteTopics(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: &n})
		}
	} else {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	}
	mayDelete := s.topicAuthorizer(r, acl.OpDelete)
	mayDescribe := s.topicAuthorizer(r, acl.OpDescribe)
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		var err error
		switch {
		case tg.name != nil && tg.id != [16]byte{}:
			err = newKafkaError(kerr.InvalidRequest, "topic named both by name and by id")
		case tg.name != nil && !mayDelete(*tg.name):
			// Before existence, which stays undisclosed (Kafka).
			err = newKafkaError(kerr.TopicAuthorizationFailed, "not authorized to delete topic %q", *tg.name)
		case tg.name != nil:
			if t := s.topic(*tg.name); t != nil {
				st.TopicID = t.id
			}
			err = s.deleteTopic(*tg.name)
		case tg.id != [16]byte{}:
			if t := s.topicByID(coord.TopicID(tg.id)); t != nil {
				name := t.name
				switch {
				case !mayDescribe(name):
					// Kafka: the ID is no secret, the name is.
					err = newKafkaError(kerr.TopicAuthorizationFailed, "not authorized to describe topic id %s", coord.TopicID(tg.id))
				case !mayDelete(name):
					st.Topic = &name
					err = newKafkaError(kerr.TopicAuthorizationFailed, "not authorized to delete topic %q", name)
				default:
					st.Topic = &name
					err = s.deleteTopic(name)
				}
			} else {
				err = newKafkaError(kerr.UnknownTopicID, "no topic with id %s", coord.TopicID(tg.id))
			}
		default:
			err = newKafkaError(kerr.InvalidRequest, "topic with neither name nor id")
		}
		if err != nil {
			code, msg := errorCode(err)
			st.ErrorCode = code
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}
