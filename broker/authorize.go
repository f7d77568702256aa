package broker

import (
	"strings"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorization: the broker's authorizer (package acl) and the checks the
// request handlers make through it.
//
// With authorizer.class.name set, Server.authz holds an acl.Authorizer
// built from the acl settings (settings_acl.go) and fed the coordinator's
// ACLs (coord.ACLStore): loaded before the broker serves, then replaced
// whole at every change the coordinator reports (its ZooKeeper watches
// bring other brokers' changes within milliseconds). Without it authz is
// nil and every check passes, as in Kafka without an authorizer.
//
// A handler checks with one call, and answers the resource's
// authorization error when it fails:
//
//	if !s.authorize(r, acl.OpWrite, acl.Topic(name)) { ... kerr.TopicAuthorizationFailed ... }
//	if !s.authorize(r, acl.OpAlter, acl.Cluster) { ... kerr.ClusterAuthorizationFailed ... }
//	ops := s.authorizedOperations(r, acl.Topic(name)) // include_*_authorized_operations
//
// The principal is the request's connection's (conn.principal); the host
// is the client's IP address without Kafka's display "/".

// principal is the connection's authenticated principal, "Type:name"
// (authenticate.go): the SASL user, the mapped client certificate
// subject on SSL, else User:ANONYMOUS.
func (c *conn) principal() string {
	if s := c.session(); s != nil {
		return s.principal
	}
	return anonymous
}

// peer is who sent r: its connection's principal (anonymous when the
// request carries no connection) and the client's IP address.
func (r *request) peer() (principal, host string) {
	principal = anonymous
	if r.conn != nil {
		principal = r.conn.principal()
		host = r.conn.host
	} else if r.ctx != nil {
		host = group.ClientFrom(r.ctx).Host
	}
	return principal, strings.TrimPrefix(host, "/")
}

// startAuthorizer builds the authorizer when authorizer.class.name is set,
// loads the coordinator's ACLs into it and keeps them current until the
// server closes. The settings were validated by ConfigFromProperties.
func (s *Server) startAuthorizer() error {
	cfg, enabled, err := acl.ConfigFromProperties(s.cfg.Properties)
	if err != nil || !enabled {
		return err
	}
	a := acl.NewAuthorizer(cfg)
	bindings, changed := s.coord.ACLs()
	a.Update(bindings)
	s.authz = a
	s.log.Info("authorizer enabled", "class", s.cfg.Properties[acl.PropClassName], "acls", a.Len(),
		"super_users", len(cfg.SuperUsers), "allow_everyone_if_no_acl_found", cfg.AllowEveryoneIfNoACL)
	s.bgWG.Add(1)
	go s.aclLoop(changed)
	return nil
}

// aclLoop replaces the authorizer's ACLs at every change.
func (s *Server) aclLoop(changed <-chan struct{}) {
	defer s.bgWG.Done()
	for {
		select {
		case <-s.closed:
			return
		case <-changed:
		}
		var bindings []acl.Binding
		bindings, changed = s.coord.ACLs()
		s.authz.Update(bindings)
		s.log.Debug("ACLs updated", "acls", s.authz.Len())
	}
}

// authorize reports whether r's sender may perform op on res; always true
// without an authorizer.
func (s *Server) authorize(r *request, op acl.Operation, res acl.Resource) bool {
	if s.authz == nil {
		return true
	}
	principal, host := r.peer()
	return s.authz.Authorize(principal, host, op, res)
}

// authorizeByResourceType reports whether r's sender may perform op on at
// least one resource of type t (KIP-679); always true without an
// authorizer.
func (s *Server) authorizeByResourceType(r *request, op acl.Operation, t acl.ResourceType) bool {
	if s.authz == nil {
		return true
	}
	principal, host := r.peer()
	return s.authz.AuthorizeByResourceType(principal, host, op, t)
}

// authorizedOperations is the authorized-operations bit field of res for
// r's sender: every operation of the resource type without an authorizer,
// as Kafka answers.
func (s *Server) authorizedOperations(r *request, res acl.Resource) int32 {
	if s.authz == nil {
		return acl.AllOperations(res.Type)
	}
	principal, host := r.peer()
	return s.authz.AuthorizedOperations(principal, host, res)
}

// topicAuthorizer returns a check of op on topics by name for r's sender,
// each name asked of the authorizer once, as Kafka's filterByAuthorized
// does for a request's topics.
func (s *Server) topicAuthorizer(r *request, op acl.Operation) func(name string) bool {
	if s.authz == nil {
		return func(string) bool { return true }
	}
	seen := map[string]bool{}
	return func(name string) bool {
		ok, done := seen[name]
		if !done {
			ok = s.authorize(r, op, acl.Topic(name))
			seen[name] = ok
		}
		return ok
	}
}

// mayCreateTopic reports whether r's sender may create topic name: CREATE
// on the cluster or on the topic, as Kafka asks for CreateTopics and
// Metadata's auto-creation.
func (s *Server) mayCreateTopic(r *request, name string) bool {
	return s.authorize(r, acl.OpCreate, acl.Cluster) || s.authorize(r, acl.OpCreate, acl.Topic(name))
}

// configResourceDenied is the authorization error of op (DESCRIBE_CONFIGS
// or ALTER_CONFIGS) on a config resource, as Kafka answers it: a topic
// needs op on the topic (TOPIC_AUTHORIZATION_FAILED), a group op on the
// group (GROUP_AUTHORIZATION_FAILED), a broker or broker logger op on the
// cluster (CLUSTER_AUTHORIZATION_FAILED). Nil when
// allowed, and for other types, which the handlers refuse themselves.
func (s *Server) configResourceDenied(r *request, op acl.Operation, typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !s.authorize(r, op, acl.Topic(name)) {
			return newKafkaError(kerr.TopicAuthorizationFailed, "not authorized to %s of topic %q", op, name)
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !s.authorize(r, op, acl.Group(name)) {
			return newKafkaError(kerr.GroupAuthorizationFailed, "not authorized to %s of group %q", op, name)
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !s.authorize(r, op, acl.Cluster) {
			return newKafkaError(kerr.ClusterAuthorizationFailed, "not authorized to %s of the cluster", op)
		}
	}
	return nil
}
