package broker

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	franzplain "github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
)

// The ACL matrix: every API a client can call, each run by a principal
// granted exactly what Kafka asks for it (which must pass the check) and
// by one granted less (which must get Kafka's authorization error). The
// principals are PLAIN users from the SASL_PLAINTEXT listener's JAAS
// config, so they are what the broker authenticated; the fixtures
// (topics, groups with offsets) are made through the PLAINTEXT listener,
// whose anonymous principal is a super user.

// binding is an ALLOW (or, with deny, DENY) ACL of principal on a
// literal resource; a name ending in "*" is a PREFIXED pattern of the
// name without it.
func binding(principal string, op acl.Operation, rt acl.ResourceType, name string, deny ...bool) acl.Binding {
	pt := acl.PatternLiteral
	if strings.HasSuffix(name, "*") {
		pt, name = acl.PatternPrefixed, strings.TrimSuffix(name, "*")
	}
	perm := acl.PermissionAllow
	if len(deny) > 0 && deny[0] {
		perm = acl.PermissionDeny
	}
	return acl.Binding{Pattern: acl.Pattern{Type: rt, Name: name, Pattern: pt},
		Entry: acl.Entry{Principal: principal, Host: "*", Operation: op, Permission: perm}}
}

// grant is what a matrix row gives a principal: ACLs on the row's topic
// (T), group (G), transactional id (X) or the cluster.
type grant struct {
	op   acl.Operation
	rt   acl.ResourceType
	name string // "" is the row's own resource of type rt
	deny bool
}

func topicGrant(op acl.Operation) grant { return grant{op: op, rt: acl.ResourceTopic} }
func groupGrant(op acl.Operation) grant { return grant{op: op, rt: acl.ResourceGroup} }
func txnGrant(op acl.Operation) grant   { return grant{op: op, rt: acl.ResourceTransactionalID} }
func clusterGrant(op acl.Operation) grant {
	return grant{op: op, rt: acl.ResourceCluster, name: acl.ClusterName}
}

// matrixEnv is what a row's call works with.
type matrixEnv struct {
	t      *testing.T
	s      *Server
	topic  string // created with one partition, a record and, for the group, a committed offset
	group  string // an Empty group with an offset of topic committed
	txn    string
	fresh  string // a topic name that does not exist
	broker *kgo.Broker
	cl     *kgo.Client
}

func (e *matrixEnv) request(req kmsg.Request) kmsg.Response {
	e.t.Helper()
	resp, err := e.broker.Request(testCtx(e.t), req)
	if err != nil {
		e.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

type matrixRow struct {
	api     string
	allow   []grant // the allowed principal's ACLs
	deny    []grant // the denied principal's ACLs (none by default)
	call    func(e *matrixEnv) int16
	allowed int16 // the allowed principal's code: 0, or the error past the check
	denied  int16 // Kafka's authorization error
}

var (
	codeTopicAuth   = kerr.TopicAuthorizationFailed.Code
	codeGroupAuth   = kerr.GroupAuthorizationFailed.Code
	codeClusterAuth = kerr.ClusterAuthorizationFailed.Code
	codeTxnAuth     = kerr.TransactionalIDAuthorizationFailed.Code
)

func matrixRows() []matrixRow {
	produce := func(e *matrixEnv, txn bool) int16 {
		req := produceRequest(e.topic, 0, buildBatch(e.t, segment.CodecNone, 1))
		if txn {
			req.TransactionID = &e.txn
		}
		return e.request(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	metadata := func(e *matrixEnv, topic string, auto bool) int16 {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &topic
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = auto
		return e.request(req).(*kmsg.MetadataResponse).Topics[0].ErrorCode
	}
	commit := func(e *matrixEnv) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = e.group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = e.topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return e.request(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	txnCommit := func(e *matrixEnv) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version = 3
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = e.txn, e.group, 1, 0, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = e.topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		// A partition that does not exist: past the checks the answer is
		// UNKNOWN_TOPIC_OR_PARTITION, before any transaction is looked at.
		rp.Partition, rp.Offset = 99, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return e.request(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	offsetFetch := func(e *matrixEnv) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = e.group
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = e.topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = e.group
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = e.topic, []int32{0}
		rg.Topics = append(rg.Topics, gt)
		req.Groups = append(req.Groups, rg)
		resp := e.request(req).(*kmsg.OffsetFetchResponse)
		if resp.Version >= 8 {
			g := resp.Groups[0]
			if g.ErrorCode != 0 {
				return g.ErrorCode
			}
			return g.Topics[0].Partitions[0].ErrorCode
		}
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	findCoordinator := func(e *matrixEnv, typ int8, key string) int16 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = typ, key, []string{key}
		resp := e.request(req).(*kmsg.FindCoordinatorResponse)
		if resp.Version >= 4 {
			return resp.Coordinators[0].ErrorCode
		}
		return resp.ErrorCode
	}
	offsetDelete := func(e *matrixEnv) int16 {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = e.group
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = e.topic
		rp := kmsg.NewOffsetDeleteRequestTopicPartition()
		rp.Partition = 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := e.request(req).(*kmsg.OffsetDeleteResponse)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	createTopic := func(e *matrixEnv) int16 {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = e.fresh, 1, 1
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 10000
		return e.request(req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
	}
	describeConfigs := func(e *matrixEnv, typ kmsg.ConfigResourceType, name string) int16 {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, name
		req.Resources = append(req.Resources, rr)
		return e.request(req).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode
	}
	incrementalAlter := func(e *matrixEnv, typ kmsg.ConfigResourceType, name string, configs ...kmsg.IncrementalAlterConfigsRequestResourceConfig) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.Configs = typ, name, configs
		req.Resources = append(req.Resources, rr)
		return e.request(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}
	// txnReady waits until this broker coordinates the row's
	// transactional id (creating __transaction_state, loading its
	// partition), so that a call past the authorization check reaches the
	// coordinator.
	txnReady := func(e *matrixEnv) {
		e.t.Helper()
		if !poll.For(30*time.Second, func() bool {
			_, err := e.s.txnCoordinator(e.txn, true)
			return err == nil && e.s.txns.Status(e.txn) == nil
		}) {
			e.t.Fatalf("the transaction coordinator of %q did not load", e.txn)
		}
	}
	addPartitionsToTxn := func(e *matrixEnv) int16 {
		txnReady(e)
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 3
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = e.txn, 1, 0
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = e.topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		return e.request(req).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
	}
	addOffsetsToTxn := func(e *matrixEnv) int16 {
		txnReady(e)
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = e.txn, 1, 0, e.group
		return e.request(req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
	}
	endTxn := func(e *matrixEnv) int16 {
		txnReady(e)
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = e.txn, 1, 0, true
		return e.request(req).(*kmsg.EndTxnResponse).ErrorCode
	}
	describeTxn := func(e *matrixEnv) int16 {
		txnReady(e)
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{e.txn}
		return e.request(req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
	}
	initProducerID := func(e *matrixEnv, txn bool) int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		if txn {
			txnReady(e)
			req.TransactionalID = &e.txn
		}
		req.TransactionTimeoutMillis = 60000
		return e.request(req).(*kmsg.InitProducerIDResponse).ErrorCode
	}
	brokerName := func(e *matrixEnv) string { return fmt.Sprint(e.s.cfg.BrokerID) }
	aclCreation := func(e *matrixEnv) kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "acl-"+e.topic, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:nobody", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		return c
	}

	return []matrixRow{
		{api: "Produce", allow: []grant{topicGrant(acl.OpWrite)}, deny: []grant{topicGrant(acl.OpRead)},
			call: func(e *matrixEnv) int16 { return produce(e, false) }, denied: codeTopicAuth},
		{api: "Produce/transactional-id", allow: []grant{topicGrant(acl.OpWrite), txnGrant(acl.OpWrite)}, deny: []grant{topicGrant(acl.OpWrite), txnGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 { return produce(e, true) }, denied: codeTxnAuth},
		{api: "Produce/DENY-beats-ALLOW", allow: []grant{topicGrant(acl.OpAll)}, deny: []grant{topicGrant(acl.OpAll), {op: acl.OpWrite, rt: acl.ResourceTopic, deny: true}},
			call: func(e *matrixEnv) int16 { return produce(e, false) }, denied: codeTopicAuth},
		{api: "Fetch", allow: []grant{topicGrant(acl.OpRead)}, deny: []grant{topicGrant(acl.OpWrite)},
			call: func(e *matrixEnv) int16 {
				return e.request(fetchV12{fetchRequest(e.topic, 0, 0, 1<<20)}).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
			}, denied: codeTopicAuth},
		{api: "Fetch/prefixed", allow: []grant{{op: acl.OpRead, rt: acl.ResourceTopic, name: "t-Fetch.pre*"}}, deny: []grant{{op: acl.OpRead, rt: acl.ResourceTopic, name: "t-Fetch.prefixedX*"}},
			call: func(e *matrixEnv) int16 {
				return e.request(fetchV12{fetchRequest(e.topic, 0, 0, 1<<20)}).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
			}, denied: codeTopicAuth},
		{api: "ListOffsets", allow: []grant{topicGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrListOffsetsRequest()
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = e.topic
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.Timestamp = 0, -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return e.request(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
			}, denied: codeTopicAuth},
		{api: "OffsetForLeaderEpoch", allow: []grant{topicGrant(acl.OpRead)}, // READ implies DESCRIBE
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrOffsetForLeaderEpochRequest()
				req.ReplicaID = -1
				rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
				rt.Topic = e.topic
				rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, -1, 0
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return e.request(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
			}, denied: codeTopicAuth},
		{api: "WriteTxnMarkers", allow: []grant{clusterGrant(acl.OpClusterAction)}, deny: []grant{clusterGrant(acl.OpAlter)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrWriteTxnMarkersRequest()
				m := kmsg.NewWriteTxnMarkersRequestMarker()
				m.ProducerID, m.Committed = 4242, true // unknown producer: an empty transaction's marker
				mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				mt.Topic, mt.Partitions = e.topic, []int32{0}
				m.Topics = append(m.Topics, mt)
				req.Markers = append(req.Markers, m)
				return e.request(req).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
			}, denied: codeClusterAuth},
		{api: "DescribeProducers", allow: []grant{topicGrant(acl.OpRead)}, deny: []grant{topicGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrDescribeProducersRequest()
				rt := kmsg.NewDescribeProducersRequestTopic()
				rt.Topic, rt.Partitions = e.topic, []int32{0}
				req.Topics = append(req.Topics, rt)
				return e.request(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
			}, denied: codeTopicAuth},
		{api: "Metadata", allow: []grant{topicGrant(acl.OpDescribe)}, deny: []grant{{op: acl.OpDescribe, rt: acl.ResourceTopic, name: "other"}},
			call: func(e *matrixEnv) int16 { return metadata(e, e.topic, false) }, denied: codeTopicAuth},
		{api: "Metadata/unknown-topic", allow: []grant{{op: acl.OpDescribe, rt: acl.ResourceTopic, name: "fresh-*"}},
			call:    func(e *matrixEnv) int16 { return metadata(e, e.fresh, false) },
			allowed: kerr.UnknownTopicOrPartition.Code, denied: codeTopicAuth}, // existence stays undisclosed
		{api: "Metadata/auto-create", allow: []grant{{op: acl.OpDescribe, rt: acl.ResourceTopic, name: "fresh-*"}, {op: acl.OpCreate, rt: acl.ResourceTopic, name: "fresh-*"}},
			deny: []grant{{op: acl.OpDescribe, rt: acl.ResourceTopic, name: "fresh-*"}},
			call: func(e *matrixEnv) int16 { return metadata(e, e.fresh, true) }, denied: codeTopicAuth},
		{api: "Metadata/auto-create-cluster", allow: []grant{{op: acl.OpDescribe, rt: acl.ResourceTopic, name: "fresh-*"}, clusterGrant(acl.OpCreate)},
			deny: []grant{{op: acl.OpDescribe, rt: acl.ResourceTopic, name: "fresh-*"}, {op: acl.OpCreate, rt: acl.ResourceTopic, name: "other"}},
			call: func(e *matrixEnv) int16 { return metadata(e, e.fresh, true) }, denied: codeTopicAuth},
		{api: "OffsetCommit", allow: []grant{groupGrant(acl.OpRead), topicGrant(acl.OpRead)}, deny: []grant{topicGrant(acl.OpRead), groupGrant(acl.OpDescribe)},
			call: commit, denied: codeGroupAuth},
		{api: "OffsetCommit/topic", allow: []grant{groupGrant(acl.OpRead), topicGrant(acl.OpRead)}, deny: []grant{groupGrant(acl.OpRead), topicGrant(acl.OpDescribe)},
			call: commit, denied: codeTopicAuth},
		{api: "TxnOffsetCommit", allow: []grant{txnGrant(acl.OpWrite), groupGrant(acl.OpRead), topicGrant(acl.OpRead)},
			deny: []grant{txnGrant(acl.OpDescribe), groupGrant(acl.OpRead), topicGrant(acl.OpRead)},
			call: txnCommit, allowed: kerr.UnknownTopicOrPartition.Code, denied: codeTxnAuth},
		{api: "TxnOffsetCommit/group", allow: []grant{txnGrant(acl.OpWrite), groupGrant(acl.OpRead), topicGrant(acl.OpRead)},
			deny: []grant{txnGrant(acl.OpWrite), groupGrant(acl.OpDescribe), topicGrant(acl.OpRead)},
			call: txnCommit, allowed: kerr.UnknownTopicOrPartition.Code, denied: codeGroupAuth},
		{api: "TxnOffsetCommit/topic", allow: []grant{txnGrant(acl.OpWrite), groupGrant(acl.OpRead), topicGrant(acl.OpRead)},
			deny: []grant{txnGrant(acl.OpWrite), groupGrant(acl.OpRead), topicGrant(acl.OpDescribe)},
			call: txnCommit, allowed: kerr.UnknownTopicOrPartition.Code, denied: codeTopicAuth},
		{api: "OffsetFetch", allow: []grant{groupGrant(acl.OpDescribe), topicGrant(acl.OpDescribe)}, deny: []grant{topicGrant(acl.OpDescribe)},
			call: offsetFetch, denied: codeGroupAuth},
		{api: "OffsetFetch/topic", allow: []grant{groupGrant(acl.OpDescribe), topicGrant(acl.OpDescribe)}, deny: []grant{groupGrant(acl.OpRead)},
			call: offsetFetch, denied: codeTopicAuth},
		{api: "FindCoordinator", allow: []grant{groupGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 { return findCoordinator(e, coordinatorTypeGroup, e.group) }, denied: codeGroupAuth},
		{api: "FindCoordinator/transaction", allow: []grant{txnGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 { return findCoordinator(e, coordinatorTypeTransaction, e.txn) }, denied: codeTxnAuth},
		{api: "FindCoordinator/share", allow: []grant{clusterGrant(acl.OpClusterAction)}, // v6
			call: func(e *matrixEnv) int16 {
				var code int16
				poll.For(30*time.Second, func() bool { // the first creates __share_group_state
					code = findCoordinator(e, coordinatorTypeShare, "g:AAAAAAAAAAAAAAAAAAAAAA:0")
					return code != kerr.CoordinatorNotAvailable.Code
				})
				return code
			}, denied: codeClusterAuth},
		{api: "WriteShareGroupState", allow: []grant{clusterGrant(acl.OpClusterAction)}, deny: []grant{clusterGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrWriteShareGroupStateRequest()
				req.GroupID = e.group
				rt := kmsg.NewWriteShareGroupStateRequestTopic()
				rt.TopicID = [16]byte{1}
				rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return e.request(req).(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
			}, allowed: kerr.UnknownTopicOrPartition.Code, denied: codeClusterAuth}, // no such topic id
		{api: "JoinGroup", allow: []grant{groupGrant(acl.OpRead)}, deny: []grant{groupGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrJoinGroupRequest()
				req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = e.group, 30000, 30000, "consumer"
				p := kmsg.NewJoinGroupRequestProtocol()
				p.Name, p.Metadata = "range", []byte{}
				req.Protocols = append(req.Protocols, p)
				return e.request(req).(*kmsg.JoinGroupResponse).ErrorCode
			}, allowed: kerr.MemberIDRequired.Code, denied: codeGroupAuth}, // KIP-394's first answer
		{api: "SyncGroup", allow: []grant{groupGrant(acl.OpRead)}, deny: []grant{groupGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrSyncGroupRequest()
				req.Group, req.Generation, req.MemberID = e.group, 1, "nobody"
				return e.request(req).(*kmsg.SyncGroupResponse).ErrorCode
			}, allowed: kerr.UnknownMemberID.Code, denied: codeGroupAuth},
		{api: "Heartbeat", allow: []grant{groupGrant(acl.OpRead)}, deny: []grant{groupGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrHeartbeatRequest()
				req.Group, req.Generation, req.MemberID = e.group, 1, "nobody"
				return e.request(req).(*kmsg.HeartbeatResponse).ErrorCode
			}, allowed: kerr.UnknownMemberID.Code, denied: codeGroupAuth},
		{api: "LeaveGroup", allow: []grant{groupGrant(acl.OpRead)}, deny: []grant{groupGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrLeaveGroupRequest()
				req.Group, req.MemberID = e.group, "nobody"
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = "nobody"
				req.Members = append(req.Members, m)
				resp := e.request(req).(*kmsg.LeaveGroupResponse)
				if resp.ErrorCode == 0 && len(resp.Members) > 0 {
					return resp.Members[0].ErrorCode
				}
				return resp.ErrorCode
			}, allowed: kerr.UnknownMemberID.Code, denied: codeGroupAuth},
		{api: "DescribeGroups", allow: []grant{groupGrant(acl.OpDescribe)}, deny: []grant{topicGrant(acl.OpAll)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrDescribeGroupsRequest()
				req.Groups = []string{e.group}
				return e.request(req).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode
			}, denied: codeGroupAuth},
		{api: "DeleteGroups", allow: []grant{groupGrant(acl.OpDelete)}, deny: []grant{groupGrant(acl.OpRead)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrDeleteGroupsRequest()
				req.Groups = []string{e.group}
				return e.request(req).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
			}, denied: codeGroupAuth},
		{api: "OffsetDelete", allow: []grant{groupGrant(acl.OpDelete), topicGrant(acl.OpRead)}, deny: []grant{groupGrant(acl.OpRead), topicGrant(acl.OpRead)},
			call: offsetDelete, denied: codeGroupAuth},
		{api: "OffsetDelete/topic", allow: []grant{groupGrant(acl.OpDelete), topicGrant(acl.OpRead)}, deny: []grant{groupGrant(acl.OpDelete), topicGrant(acl.OpDescribe)},
			call: offsetDelete, denied: codeTopicAuth},
		{api: "CreateTopics", allow: []grant{{op: acl.OpCreate, rt: acl.ResourceTopic, name: "fresh-*"}}, deny: []grant{clusterGrant(acl.OpAlter)},
			call: createTopic, denied: codeTopicAuth},
		{api: "CreateTopics/cluster", allow: []grant{clusterGrant(acl.OpCreate)}, deny: []grant{{op: acl.OpCreate, rt: acl.ResourceTopic, name: "other-*"}},
			call: createTopic, denied: codeTopicAuth},
		{api: "DeleteTopics", allow: []grant{topicGrant(acl.OpDelete)}, deny: []grant{topicGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrDeleteTopicsRequest()
				req.TopicNames = []string{e.topic}
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.Topic = &e.topic
				req.Topics = append(req.Topics, rt)
				req.TimeoutMillis = 10000
				return e.request(req).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode
			}, denied: codeTopicAuth},
		{api: "DeleteRecords", allow: []grant{topicGrant(acl.OpDelete)}, deny: []grant{topicGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrDeleteRecordsRequest()
				req.TimeoutMillis = 10000
				rt := kmsg.NewDeleteRecordsRequestTopic()
				rt.Topic = e.topic
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Partition, rp.Offset = 0, 1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return e.request(req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode
			}, denied: codeTopicAuth},
		{api: "CreatePartitions", allow: []grant{topicGrant(acl.OpAlter)}, deny: []grant{topicGrant(acl.OpAlterConfigs)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrCreatePartitionsRequest()
				rt := kmsg.NewCreatePartitionsRequestTopic()
				rt.Topic, rt.Count = e.topic, 2
				req.Topics = append(req.Topics, rt)
				req.TimeoutMillis = 10000
				return e.request(req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
			}, denied: codeTopicAuth},
		{api: "DescribeConfigs/topic", allow: []grant{topicGrant(acl.OpDescribeConfigs)}, deny: []grant{topicGrant(acl.OpRead)},
			call: func(e *matrixEnv) int16 { return describeConfigs(e, kmsg.ConfigResourceTypeTopic, e.topic) }, denied: codeTopicAuth},
		{api: "DescribeConfigs/broker", allow: []grant{clusterGrant(acl.OpAlterConfigs)}, // implies DESCRIBE_CONFIGS
			deny: []grant{clusterGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 { return describeConfigs(e, kmsg.ConfigResourceTypeBroker, brokerName(e)) }, denied: codeClusterAuth},
		{api: "AlterConfigs/topic", allow: []grant{topicGrant(acl.OpAlterConfigs)}, deny: []grant{topicGrant(acl.OpDescribeConfigs)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrAlterConfigsRequest()
				rr := kmsg.NewAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, e.topic
				c := kmsg.NewAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "retention.ms", kmsg.StringPtr("3600000")
				rr.Configs = append(rr.Configs, c)
				req.Resources = append(req.Resources, rr)
				return e.request(req).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode
			}, denied: codeTopicAuth},
		{api: "AlterConfigs/broker", allow: []grant{clusterGrant(acl.OpAlterConfigs)}, deny: []grant{clusterGrant(acl.OpAlter)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrAlterConfigsRequest()
				req.ValidateOnly = true
				rr := kmsg.NewAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, brokerName(e)
				req.Resources = append(req.Resources, rr)
				return e.request(req).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode
			}, denied: codeClusterAuth},
		{api: "IncrementalAlterConfigs/topic", allow: []grant{topicGrant(acl.OpAlterConfigs)}, deny: []grant{topicGrant(acl.OpAlter)},
			call: func(e *matrixEnv) int16 {
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value, c.Op = "retention.ms", kmsg.StringPtr("3600000"), kmsg.IncrementalAlterConfigOpSet
				return incrementalAlter(e, kmsg.ConfigResourceTypeTopic, e.topic, c)
			}, denied: codeTopicAuth},
		{api: "IncrementalAlterConfigs/broker", allow: []grant{clusterGrant(acl.OpAlterConfigs)}, deny: []grant{clusterGrant(acl.OpDescribeConfigs)},
			call:   func(e *matrixEnv) int16 { return incrementalAlter(e, kmsg.ConfigResourceTypeBroker, brokerName(e)) },
			denied: codeClusterAuth},
		{api: "DescribeConfigs/group", allow: []grant{groupGrant(acl.OpDescribeConfigs)}, deny: []grant{groupGrant(acl.OpRead)},
			call: func(e *matrixEnv) int16 { return describeConfigs(e, kmsg.ConfigResourceTypeGroupConfig, e.group) }, denied: codeGroupAuth},
		{api: "IncrementalAlterConfigs/group", allow: []grant{groupGrant(acl.OpAlterConfigs)}, deny: []grant{groupGrant(acl.OpDescribeConfigs)},
			call: func(e *matrixEnv) int16 {
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value, c.Op = "share.auto.offset.reset", kmsg.StringPtr("earliest"), kmsg.IncrementalAlterConfigOpSet
				return incrementalAlter(e, kmsg.ConfigResourceTypeGroupConfig, e.group, c)
			}, denied: codeGroupAuth},
		{api: "ElectLeaders", allow: []grant{clusterGrant(acl.OpAlter)}, deny: []grant{topicGrant(acl.OpAll), clusterGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrElectLeadersRequest()
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic, rt.Partitions = e.topic, []int32{0}
				req.Topics = append(req.Topics, rt)
				req.TimeoutMillis = 10000
				return e.request(req).(*kmsg.ElectLeadersResponse).ErrorCode
			}, denied: codeClusterAuth},
		{api: "InitProducerId", allow: []grant{clusterGrant(acl.OpIdempotentWrite)}, deny: []grant{topicGrant(acl.OpRead), clusterGrant(acl.OpAlter)},
			call: func(e *matrixEnv) int16 { return initProducerID(e, false) }, denied: codeClusterAuth},
		{api: "InitProducerId/topic-write", allow: []grant{{op: acl.OpWrite, rt: acl.ResourceTopic, name: "somewhere-*"}}, // KIP-679
			deny: []grant{topicGrant(acl.OpRead)},
			call: func(e *matrixEnv) int16 { return initProducerID(e, false) }, denied: codeClusterAuth},
		{api: "InitProducerId/transactional-id", allow: []grant{txnGrant(acl.OpWrite)}, deny: []grant{txnGrant(acl.OpDescribe), clusterGrant(acl.OpIdempotentWrite)},
			call: func(e *matrixEnv) int16 { return initProducerID(e, true) }, denied: codeTxnAuth},
		{api: "AddPartitionsToTxn", allow: []grant{txnGrant(acl.OpWrite), topicGrant(acl.OpWrite)}, deny: []grant{topicGrant(acl.OpWrite), txnGrant(acl.OpDescribe)},
			call: addPartitionsToTxn, allowed: kerr.InvalidProducerIDMapping.Code, denied: codeTxnAuth}, // past the check: no such producer
		{api: "AddPartitionsToTxn/topic", allow: []grant{txnGrant(acl.OpWrite), topicGrant(acl.OpWrite)}, deny: []grant{txnGrant(acl.OpWrite), topicGrant(acl.OpRead)},
			call: addPartitionsToTxn, allowed: kerr.InvalidProducerIDMapping.Code, denied: codeTopicAuth},
		{api: "AddOffsetsToTxn", allow: []grant{txnGrant(acl.OpWrite), groupGrant(acl.OpRead)}, deny: []grant{groupGrant(acl.OpRead), txnGrant(acl.OpDescribe)},
			call: addOffsetsToTxn, allowed: kerr.InvalidProducerIDMapping.Code, denied: codeTxnAuth},
		{api: "AddOffsetsToTxn/group", allow: []grant{txnGrant(acl.OpWrite), groupGrant(acl.OpRead)}, deny: []grant{txnGrant(acl.OpWrite), groupGrant(acl.OpDescribe)},
			call: addOffsetsToTxn, allowed: kerr.InvalidProducerIDMapping.Code, denied: codeGroupAuth},
		{api: "EndTxn", allow: []grant{txnGrant(acl.OpWrite)}, deny: []grant{txnGrant(acl.OpDescribe)},
			call: endTxn, allowed: kerr.InvalidProducerIDMapping.Code, denied: codeTxnAuth},
		{api: "DescribeTransactions", allow: []grant{txnGrant(acl.OpDescribe)}, deny: []grant{topicGrant(acl.OpAll)},
			call: describeTxn, allowed: kerr.TransactionalIDNotFound.Code, denied: codeTxnAuth},
		{api: "AlterPartitionReassignments", allow: []grant{clusterGrant(acl.OpAlter)}, deny: []grant{clusterGrant(acl.OpDescribe), topicGrant(acl.OpAll)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
				rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
				rt.Topic = e.topic
				rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
				rp.Partition = 0 // Replicas nil: a cancel, NO_REASSIGNMENT_IN_PROGRESS past the check
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return e.request(req).(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode
			}, denied: codeClusterAuth},
		{api: "ListPartitionReassignments", allow: []grant{clusterGrant(acl.OpDescribe)}, deny: []grant{clusterGrant(acl.OpCreate), topicGrant(acl.OpAll)},
			call: func(e *matrixEnv) int16 {
				return e.request(kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse).ErrorCode
			}, denied: codeClusterAuth},
		{api: "UpdateFeatures", allow: []grant{clusterGrant(acl.OpAlter)}, deny: []grant{clusterGrant(acl.OpDescribe), topicGrant(acl.OpAll)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrUpdateFeaturesRequest()
				u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
				u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", 1, 1
				req.FeatureUpdates = append(req.FeatureUpdates, u)
				resp := e.request(req).(*kmsg.UpdateFeaturesResponse)
				if resp.ErrorCode == 0 && (len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0) {
					e.t.Errorf("UpdateFeatures allowed: results %+v, want transaction.version 1 set", resp.Results)
				}
				return resp.ErrorCode
			}, denied: codeClusterAuth},
		{api: "DescribeLogDirs", allow: []grant{clusterGrant(acl.OpDescribe)}, deny: []grant{clusterGrant(acl.OpCreate), topicGrant(acl.OpAll)},
			call: func(e *matrixEnv) int16 {
				resp := e.request(kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse)
				if resp.ErrorCode == 0 && len(resp.Dirs) == 0 {
					e.t.Errorf("DescribeLogDirs allowed but no directory described")
				}
				if resp.ErrorCode != 0 && len(resp.Dirs) != 0 {
					e.t.Errorf("DescribeLogDirs denied but %d directories described", len(resp.Dirs))
				}
				return resp.ErrorCode
			}, denied: codeClusterAuth},
		{api: "AlterReplicaLogDirs", allow: []grant{clusterGrant(acl.OpAlter)}, deny: []grant{clusterGrant(acl.OpDescribe), topicGrant(acl.OpAll)},
			call: func(e *matrixEnv) int16 {
				// To the directory it is in: a no-op success past the check.
				req := kmsg.NewPtrAlterReplicaLogDirsRequest()
				rd := kmsg.NewAlterReplicaLogDirsRequestDir()
				rd.Dir = e.s.dirs.dirs[0].path
				rt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
				rt.Topic, rt.Partitions = e.topic, []int32{0}
				rd.Topics = append(rd.Topics, rt)
				req.Dirs = append(req.Dirs, rd)
				return e.request(req).(*kmsg.AlterReplicaLogDirsResponse).Topics[0].Partitions[0].ErrorCode
			}, denied: codeClusterAuth},
		{api: "DescribeUserScramCredentials", allow: []grant{clusterGrant(acl.OpDescribe)}, deny: []grant{clusterGrant(acl.OpCreate)},
			call: func(e *matrixEnv) int16 {
				return e.request(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode
			}, denied: codeClusterAuth},
		{api: "AlterUserScramCredentials", allow: []grant{clusterGrant(acl.OpAlter)}, deny: []grant{clusterGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
				u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
				u.Name, u.Mechanism, u.Iterations = "scram-"+e.topic, 1, 4096
				u.Salt, u.SaltedPassword = []byte("0123456789abcdef"), make([]byte, 32)
				req.Upsertions = append(req.Upsertions, u)
				return e.request(req).(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode
			}, denied: codeClusterAuth},
		{api: "DescribeClientQuotas", allow: []grant{clusterGrant(acl.OpDescribeConfigs)}, deny: []grant{clusterGrant(acl.OpDescribe), topicGrant(acl.OpAll)},
			call: func(e *matrixEnv) int16 {
				return e.request(kmsg.NewPtrDescribeClientQuotasRequest()).(*kmsg.DescribeClientQuotasResponse).ErrorCode
			}, denied: codeClusterAuth},
		{api: "AlterClientQuotas", allow: []grant{clusterGrant(acl.OpAlterConfigs)}, deny: []grant{clusterGrant(acl.OpDescribeConfigs), topicGrant(acl.OpAll)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrAlterClientQuotasRequest()
				en := kmsg.NewAlterClientQuotasRequestEntry()
				ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
				ent.Type, ent.Name = "client-id", kmsg.StringPtr("quota-"+e.topic)
				op := kmsg.NewAlterClientQuotasRequestEntryOp()
				op.Key, op.Value = "producer_byte_rate", 1e9
				en.Entity, en.Ops = append(en.Entity, ent), append(en.Ops, op)
				req.Entries, req.ValidateOnly = append(req.Entries, en), true
				return e.request(req).(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode
			}, denied: codeClusterAuth},
		{api: "DescribeAcls", allow: []grant{clusterGrant(acl.OpDescribe)}, deny: []grant{clusterGrant(acl.OpCreate)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrDescribeACLsRequest()
				req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				return e.request(req).(*kmsg.DescribeACLsResponse).ErrorCode
			}, denied: codeClusterAuth},
		{api: "CreateAcls", allow: []grant{clusterGrant(acl.OpAlter)}, deny: []grant{clusterGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				req := kmsg.NewPtrCreateACLsRequest()
				req.Creations = append(req.Creations, aclCreation(e))
				return e.request(req).(*kmsg.CreateACLsResponse).Results[0].ErrorCode
			}, denied: codeClusterAuth},
		{api: "DeleteAcls", allow: []grant{clusterGrant(acl.OpAlter)}, deny: []grant{clusterGrant(acl.OpDescribe)},
			call: func(e *matrixEnv) int16 {
				c := aclCreation(e)
				req := kmsg.NewPtrDeleteACLsRequest()
				f := kmsg.NewDeleteACLsRequestFilter()
				f.ResourceType, f.ResourceName, f.ResourcePatternType = c.ResourceType, &c.ResourceName, c.ResourcePatternType
				f.Principal, f.Host, f.Operation, f.PermissionType = &c.Principal, &c.Host, c.Operation, c.PermissionType
				req.Filters = append(req.Filters, f)
				return e.request(req).(*kmsg.DeleteACLsResponse).Results[0].ErrorCode
			}, denied: codeClusterAuth},
	}
}

// matrixUser is the PLAIN user name of row i's allowed (a) or denied (d)
// principal.
func matrixUser(i int, who string) string { return fmt.Sprintf("%s%d", who, i) }

// authzSASLProps are saslProps with the authorizer on, the PLAINTEXT
// listener's anonymous principal and the PLAIN user admin super users,
// and PLAIN users for users (password "<user>-pw").
func authzSASLProps(users []string, extra map[string]string) map[string]string {
	var jaas strings.Builder
	jaas.WriteString(`org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-pw"`)
	for _, u := range users {
		fmt.Fprintf(&jaas, ` user_%s="%s-pw"`, u, u)
	}
	jaas.WriteString(";")
	p := saslProps(map[string]string{
		"authorizer.class.name": acl.ClassAclAuthorizer,
		"super.users":           anonymous + ";User:admin",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas.String(),
		"auto.create.topics.enable":                           "true",
	})
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// plainClient is a franz-go client of s's SASL_PLAINTEXT listener as
// PLAIN user (password "<user>-pw").
func plainClient(t *testing.T, s *Server, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return saslClient(t, s, franzplain.Auth{User: user, Pass: user + "-pw"}.AsMechanism(), opts...)
}

// grantAll creates bindings through the coordinator and waits until s's
// authorizer holds at least want ACLs.
func grantAll(t *testing.T, s *Server, bindings []acl.Binding) {
	t.Helper()
	before := s.authz.Len()
	for i, err := range s.coord.CreateACLs(testCtx(t), bindings) {
		if err != nil {
			t.Fatalf("create %v: %v", bindings[i], err)
		}
	}
	if !poll.For(30*time.Second, func() bool { return s.authz.Len() >= before+len(bindings) }) {
		t.Fatalf("authorizer has %d ACLs, want %d", s.authz.Len(), before+len(bindings))
	}
}

// commitOffset commits offset 1 of topic/0 for group through cl (a
// simple commit, leaving an Empty group).
func commitOffset(t *testing.T, cl *kgo.Client, group, topic string) {
	t.Helper()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
	res, err := kadm.NewClient(cl).CommitOffsets(testCtx(t), group, offs)
	if err != nil || res.Error() != nil {
		t.Fatalf("commit %s %s: %v %v", group, topic, err, res.Error())
	}
}

// TestACLMatrix runs every row of matrixRows: the denied principal first
// (so nothing it must not do happened), then the allowed one.
func TestACLMatrix(t *testing.T) {
	rows := matrixRows()
	var users []string
	for i := range rows {
		users = append(users, matrixUser(i, "a"), matrixUser(i, "d"))
	}
	s := startServer(t, authzSASLProps(users, nil))
	admin := newClient(t, s)

	var bindings []acl.Binding
	envs := make([]matrixEnv, len(rows))
	for i, row := range rows {
		e := &envs[i]
		e.t, e.s = t, s
		api := strings.ReplaceAll(row.api, "/", ".") // resource names have no '/'
		e.topic, e.group, e.txn, e.fresh = "t-"+api, "g-"+api, "x-"+api, "fresh-"+api
		createTopic(t, admin, e.topic, 1, nil)
		if r := produceRaw(t, admin, e.topic, 0, buildBatch(t, segment.CodecNone, 2)); r.ErrorCode != 0 {
			t.Fatalf("fixture produce to %s: %v", e.topic, kerr.ErrorForCode(r.ErrorCode))
		}
		commitOffset(t, admin, e.group, e.topic)
		for who, gs := range map[string][]grant{"a": row.allow, "d": row.deny} {
			for _, g := range gs {
				name := g.name
				if name == "" {
					name = map[acl.ResourceType]string{acl.ResourceTopic: e.topic, acl.ResourceGroup: e.group, acl.ResourceTransactionalID: e.txn}[g.rt]
				}
				bindings = append(bindings, binding("User:"+matrixUser(i, who), g.op, g.rt, name, g.deny))
			}
		}
	}
	grantAll(t, s, bindings)
	t.Logf("%d rows, %d ACLs", len(rows), len(bindings))

	for i, row := range rows {
		for _, who := range []string{"d", "a"} {
			want := row.denied
			if who == "a" {
				want = row.allowed
			}
			// AddPartitionsToTxn as clients send it (v3: v4+ is
			// the brokers' batched form).
			versions := kversion.Stable()
			versions.SetMaxKeyVersion(24, 3)
			cl := plainClient(t, s, matrixUser(i, who), kgo.MaxVersions(versions))
			e := envs[i]
			e.cl, e.broker = cl, cl.Broker(int(s.cfg.BrokerID))
			got := row.call(&e)
			if got != want {
				t.Errorf("%s as %s (%s): %v, want %v", row.api, matrixUser(i, who), map[string]string{"a": "allowed", "d": "denied"}[who],
					kerr.ErrorForCode(got), kerr.ErrorForCode(want))
			}
		}
	}

	// Super users (User:admin on SASL) bypass ACLs: none names admin.
	su := plainClient(t, s, "admin")
	e := envs[0]
	e.cl, e.broker = su, su.Broker(int(s.cfg.BrokerID))
	for _, i := range []int{0, 3} { // Produce, Fetch
		if got := rows[i].call(&e); got != 0 {
			t.Errorf("super user %s: %v", rows[i].api, kerr.ErrorForCode(got))
		}
	}
	if _, err := kadm.NewClient(su).CreateTopic(testCtx(t), 1, 1, nil, "super-topic"); err != nil {
		t.Errorf("super user CreateTopics: %v", err)
	}
}

// TestACLMetadataAndOperations: Metadata lists only the topics a
// principal may DESCRIBE; the authorized-operations fields of Metadata,
// DescribeCluster and DescribeGroups are the principal's; ListGroups lists
// what it may DESCRIBE (all with DESCRIBE on the cluster).
func TestACLMetadataAndOperations(t *testing.T) {
	s := startServer(t, authzSASLProps([]string{"alice", "bob", "carol"}, nil))
	admin := newClient(t, s)
	for _, topic := range []string{"orders", "payments", "logs"} {
		createTopic(t, admin, topic, 1, nil)
		commitOffset(t, admin, "grp-"+topic, topic)
	}
	grantAll(t, s, []acl.Binding{
		binding("User:alice", acl.OpRead, acl.ResourceTopic, "orders"),
		binding("User:alice", acl.OpWrite, acl.ResourceTopic, "orders"),
		binding("User:alice", acl.OpAlter, acl.ResourceTopic, "pay*"),
		binding("User:alice", acl.OpDescribe, acl.ResourceCluster, acl.ClusterName),
		binding("User:alice", acl.OpIdempotentWrite, acl.ResourceCluster, acl.ClusterName),
		binding("User:alice", acl.OpRead, acl.ResourceGroup, "grp-orders"),
		binding("User:alice", acl.OpDelete, acl.ResourceGroup, "grp-orders"),
		binding("User:carol", acl.OpDescribe, acl.ResourceGroup, "grp-logs"),
	})
	ctx := testCtx(t)
	alice, bob, carol := plainClient(t, s, "alice"), plainClient(t, s, "bob"), plainClient(t, s, "carol")

	meta := func(cl *kgo.Client) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = nil
		req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = true, true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	names := func(resp *kmsg.MetadataResponse) []string {
		var out []string
		for _, mt := range resp.Topics {
			out = append(out, *mt.Topic)
		}
		slices.Sort(out)
		return out
	}
	bits := func(ops ...acl.Operation) int32 {
		var b int32
		for _, o := range ops {
			b |= 1 << o
		}
		return b
	}

	ma := meta(alice)
	if got := names(ma); !slices.Equal(got, []string{"orders", "payments"}) {
		t.Errorf("alice's topics: %v", got)
	}
	for _, mt := range ma.Topics {
		want := bits(acl.OpRead, acl.OpWrite, acl.OpDescribe) // WRITE and READ imply DESCRIBE
		if *mt.Topic == "payments" {
			want = bits(acl.OpAlter, acl.OpDescribe)
		}
		if mt.AuthorizedOperations != want {
			t.Errorf("alice's operations on %s: %b, want %b", *mt.Topic, mt.AuthorizedOperations, want)
		}
	}
	// Metadata v11+ has no cluster operations; DescribeCluster has them.
	if ma.Version <= 10 && ma.AuthorizedOperations != bits(acl.OpDescribe, acl.OpIdempotentWrite) {
		t.Errorf("alice's cluster operations in Metadata: %b", ma.AuthorizedOperations)
	}
	if mb := meta(bob); len(mb.Topics) != 0 || len(mb.Brokers) != 1 {
		t.Errorf("bob's metadata: topics %v, %d brokers", names(mb), len(mb.Brokers))
	}
	describeCluster := func(cl *kgo.Client) int32 {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatal(err, resp)
		}
		return resp.ClusterAuthorizedOperations
	}
	if got := describeCluster(alice); got != bits(acl.OpDescribe, acl.OpIdempotentWrite) {
		t.Errorf("alice's DescribeCluster operations: %b", got)
	}
	if got := describeCluster(bob); got != 0 {
		t.Errorf("bob's DescribeCluster operations: %b, want 0 (no DESCRIBE on the cluster)", got)
	}
	if got := describeCluster(admin); got != acl.AllOperations(acl.ResourceCluster) {
		t.Errorf("super user's DescribeCluster operations: %b", got)
	}

	// DescribeGroups' operations; a group it may not DESCRIBE alone fails.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"grp-orders", "grp-logs"}, true
	dgResp := brokerRequest(t, s, alice, dg).(*kmsg.DescribeGroupsResponse)
	if g := dgResp.Groups[0]; g.Group != "grp-orders" || g.ErrorCode != 0 || g.State != "Empty" || g.AuthorizedOperations != bits(acl.OpRead, acl.OpDelete, acl.OpDescribe) {
		t.Errorf("alice describes grp-orders: %+v", g)
	}
	if g := dgResp.Groups[1]; g.Group != "grp-logs" || g.ErrorCode != codeGroupAuth {
		t.Errorf("alice describes grp-logs: %+v", g)
	}

	// ListGroups: alice (DESCRIBE on the cluster) sees every group, carol
	// the one she may DESCRIBE, bob none.
	list := func(cl *kgo.Client) []string {
		resp := brokerRequest(t, s, cl, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
		if resp.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
		}
		var out []string
		for _, g := range resp.Groups {
			out = append(out, g.Group)
		}
		slices.Sort(out)
		return out
	}
	if got := list(alice); !slices.Equal(got, []string{"grp-logs", "grp-orders", "grp-payments"}) {
		t.Errorf("alice lists %v", got)
	}
	if got := list(carol); !slices.Equal(got, []string{"grp-logs"}) {
		t.Errorf("carol lists %v", got)
	}
	if got := list(bob); len(got) != 0 {
		t.Errorf("bob lists %v", got)
	}

	// OffsetFetch of all topics leaves out those it may not DESCRIBE.
	commitOffset(t, admin, "grp-orders", "logs")
	of := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group, rg.Topics = "grp-orders", nil
	of.Group, of.Topics, of.Groups = "grp-orders", nil, []kmsg.OffsetFetchRequestGroup{rg}
	ofResp := brokerRequest(t, s, alice, of).(*kmsg.OffsetFetchResponse)
	var fetched []string
	for _, g := range ofResp.Groups {
		for _, tp := range g.Topics {
			fetched = append(fetched, tp.Topic)
		}
	}
	for _, tp := range ofResp.Topics {
		fetched = append(fetched, tp.Topic)
	}
	if !slices.Equal(fetched, []string{"orders"}) {
		t.Errorf("alice's offsets of grp-orders: topics %v, want [orders] (logs is not hers)", fetched)
	}
}

// brokerRequest sends req to s's broker as cl, without the client's own
// coordinator lookups.
func brokerRequest(t *testing.T, s *Server, cl *kgo.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := cl.Broker(int(s.cfg.BrokerID)).Request(testCtx(t), req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// TestACLAllowEveryoneIfNoACLFound: with allow.everyone.if.no.acl.found a
// resource without ACLs is open to all, and one with an ACL only to whom
// it allows.
func TestACLAllowEveryoneIfNoACLFound(t *testing.T) {
	s := startServer(t, authzSASLProps([]string{"alice", "bob"}, map[string]string{"allow.everyone.if.no.acl.found": "true"}))
	admin := newClient(t, s)
	createTopic(t, admin, "open", 1, nil)
	createTopic(t, admin, "closed", 1, nil)
	grantAll(t, s, []acl.Binding{binding("User:alice", acl.OpWrite, acl.ResourceTopic, "closed")})
	bob := plainClient(t, s, "bob")
	alice := plainClient(t, s, "alice")
	produce := func(cl *kgo.Client, topic string) int16 {
		resp, err := cl.Broker(int(s.cfg.BrokerID)).Request(testCtx(t), produceRequest(topic, 0, buildBatch(t, segment.CodecNone, 1)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if c := produce(bob, "open"); c != 0 {
		t.Errorf("bob to open (no ACL): %v", kerr.ErrorForCode(c))
	}
	if c := produce(bob, "closed"); c != codeTopicAuth {
		t.Errorf("bob to closed (an ACL for alice): %v", kerr.ErrorForCode(c))
	}
	if c := produce(alice, "closed"); c != 0 {
		t.Errorf("alice to closed: %v", kerr.ErrorForCode(c))
	}
}

// TestACLChangeOnLiveConnection: an ACL created with CreateAcls (by a
// super user through kadm) lets an already connected client in on its
// next request, and DeleteAcls shuts it out again, without reconnecting.
func TestACLChangeOnLiveConnection(t *testing.T) {
	s := startServer(t, authzSASLProps([]string{"late"}, nil))
	admin := newClient(t, s)
	createTopic(t, admin, "live", 1, nil)
	late := plainClient(t, s, "late")
	br := late.Broker(int(s.cfg.BrokerID))
	fetch := func() int16 {
		resp, err := br.Request(testCtx(t), fetchV12{fetchRequest("live", 0, 0, 1<<20)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
	}
	if c := fetch(); c != codeTopicAuth {
		t.Fatalf("before the ACL: %v", kerr.ErrorForCode(c))
	}
	accepted := authCount(t, s, "SASL_PLAINTEXT", "PLAIN", "success")
	adm := kadm.NewClient(admin)
	ctx := testCtx(t)
	b := kadm.NewACLs().Topics("live").Allow("User:late").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := adm.CreateACLs(ctx, b)
	mustCreate(t, res, err, 1)
	start := time.Now()
	if !poll.For(30*time.Second, func() bool { return fetch() == 0 }) {
		t.Fatalf("fetch still denied 30s after CreateAcls")
	}
	t.Logf("allowed %v after CreateAcls", time.Since(start))
	if _, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics("live").Allow("User:late").AllowHosts().Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if !poll.For(30*time.Second, func() bool { return fetch() == codeTopicAuth }) {
		t.Fatalf("fetch still allowed 30s after DeleteAcls")
	}
	t.Logf("denied %v after DeleteAcls", time.Since(start))
	if n := authCount(t, s, "SASL_PLAINTEXT", "PLAIN", "success"); n != accepted {
		t.Errorf("the client authenticated again (%v logins, %v before): it reconnected", n, accepted)
	}
}

// TestACLSSLPrincipal: on an SSL listener with client certificates the
// principal ACLs match is the certificate's subject, "User:CN=...".
func TestACLSSLPrincipal(t *testing.T) {
	f := newTLSFixture(t)
	props := f.props("required")
	props["authorizer.class.name"] = acl.ClassAclAuthorizer
	props["super.users"] = anonymous
	s := startServer(t, props)
	createTopic(t, newClient(t, s), "certs", 1, nil)
	grantAll(t, s, []acl.Binding{binding("User:CN=carol,O=Strata", acl.OpRead, acl.ResourceTopic, "certs")})
	fetch := func(cn string) int16 {
		cert := f.ca.Client(t, pkix.Name{CommonName: cn, Organization: []string{"Strata"}})
		cl := tlsClient(t, s.ListenerAddr("SSL"), f.clientTLS(cert))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := cl.Broker(int(s.cfg.BrokerID)).Request(ctx, fetchV12{fetchRequest("certs", 0, 0, 1<<20)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
	}
	if c := fetch("carol"); c != 0 {
		t.Errorf("CN=carol: %v", kerr.ErrorForCode(c))
	}
	if c := fetch("dave"); c != codeTopicAuth {
		t.Errorf("CN=dave: %v", kerr.ErrorForCode(c))
	}
}

// TestACLTopicIDsAndConfigs: by topic ID, Metadata and DeleteTopics
// answer a topic the principal may not DESCRIBE with
// TOPIC_AUTHORIZATION_FAILED and no name (the ID is no secret); a topic
// created without DESCRIBE_CONFIGS on it is answered without its configs
// (TopicConfigErrorCode), as Kafka does.
func TestACLTopicIDsAndConfigs(t *testing.T) {
	s := startServer(t, authzSASLProps([]string{"alice", "bob"}, nil))
	admin := newClient(t, s)
	createTopic(t, admin, "secret", 1, nil)
	grantAll(t, s, []acl.Binding{
		binding("User:alice", acl.OpDescribe, acl.ResourceTopic, "secret"),
		binding("User:alice", acl.OpCreate, acl.ResourceTopic, "made-*"),
		binding("User:bob", acl.OpCreate, acl.ResourceTopic, "seen-*"),
		binding("User:bob", acl.OpDescribeConfigs, acl.ResourceTopic, "seen-*"),
	})
	alice, bob := plainClient(t, s, "alice"), plainClient(t, s, "bob")

	byName := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("secret")
	byName.Topics = append(byName.Topics, rt)
	id := brokerRequest(t, s, admin, byName).(*kmsg.MetadataResponse).Topics[0].TopicID
	if id == [16]byte{} {
		t.Fatal("no topic ID for secret")
	}
	byID := kmsg.NewPtrMetadataRequest()
	rt = kmsg.NewMetadataRequestTopic()
	rt.TopicID = id
	byID.Topics = append(byID.Topics, rt)
	if mt := brokerRequest(t, s, alice, byID).(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != 0 || mt.Topic == nil || *mt.Topic != "secret" {
		t.Errorf("alice's Metadata by ID: %v %v", kerr.ErrorForCode(mt.ErrorCode), mt.Topic)
	}
	if resp := brokerRequest(t, s, bob, byID).(*kmsg.MetadataResponse); resp.Version < 12 {
		t.Logf("Metadata v%d has no topic IDs; skipped", resp.Version)
	} else if mt := resp.Topics[0]; mt.ErrorCode != codeTopicAuth || mt.Topic != nil || mt.TopicID != id {
		t.Errorf("bob's Metadata by ID: %v name %v id %v", kerr.ErrorForCode(mt.ErrorCode), mt.Topic, mt.TopicID)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.TopicID = id
	del.Topics, del.TimeoutMillis = append(del.Topics, dt), 10000
	if resp := brokerRequest(t, s, bob, del).(*kmsg.DeleteTopicsResponse); resp.Version < 6 {
		t.Logf("DeleteTopics v%d has no topic IDs; skipped", resp.Version)
	} else if st := resp.Topics[0]; st.ErrorCode != codeTopicAuth || st.Topic != nil {
		t.Errorf("bob's DeleteTopics by ID: %v name %v", kerr.ErrorForCode(st.ErrorCode), st.Topic)
	}
	if st := brokerRequest(t, s, alice, del).(*kmsg.DeleteTopicsResponse).Topics[0]; st.ErrorCode != codeTopicAuth || st.Topic == nil || *st.Topic != "secret" {
		t.Errorf("alice's DeleteTopics by ID (DESCRIBE, no DELETE): %v name %v", kerr.ErrorForCode(st.ErrorCode), st.Topic)
	}

	create := func(cl *kgo.Client, name string) kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, 1, 1
		req.Topics, req.TimeoutMillis = append(req.Topics, ct), 10000
		return brokerRequest(t, s, cl, req).(*kmsg.CreateTopicsResponse).Topics[0]
	}
	if st := create(alice, "made-1"); st.ErrorCode != 0 || st.ConfigErrorCode != codeTopicAuth || len(st.Configs) != 0 || st.NumPartitions != 1 {
		t.Errorf("alice creates made-1 without DESCRIBE_CONFIGS: %v, config error %v, %d configs, %d partitions",
			kerr.ErrorForCode(st.ErrorCode), kerr.ErrorForCode(st.ConfigErrorCode), len(st.Configs), st.NumPartitions)
	}
	if st := create(bob, "seen-1"); st.ErrorCode != 0 || st.ConfigErrorCode != 0 || len(st.Configs) == 0 {
		t.Errorf("bob creates seen-1 with DESCRIBE_CONFIGS: %v, config error %v, %d configs",
			kerr.ErrorForCode(st.ErrorCode), kerr.ErrorForCode(st.ConfigErrorCode), len(st.Configs))
	}
}
