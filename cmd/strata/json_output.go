package main

// The --format json documents of the admin commands. Wire format of the
// CLI: field names are snake_case and stable, a field is only ever added;
// docs/cli.md lists them. A value that is unknown is null (an offset the
// group has not committed, a partition without a leader is -1 as in
// Kafka's protocol).

import (
	"fmt"
	"slices"

	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kadm"
)

type jsonTopicList struct {
	Topics []jsonTopicName `json:"topics"`
}

type jsonTopicName struct {
	Name     string `json:"name"`
	Internal bool   `json:"internal"`
}

type jsonTopics struct {
	Topics []jsonTopic `json:"topics"`
}

type jsonTopic struct {
	Name              string            `json:"name"`
	TopicID           string            `json:"topic_id"`
	Internal          bool              `json:"internal"`
	PartitionCount    int               `json:"partition_count"`
	ReplicationFactor int               `json:"replication_factor"`
	Configs           map[string]string `json:"configs"` // those set on the topic
	Partitions        []jsonPartition   `json:"partitions"`
	Error             string            `json:"error,omitempty"`
}

type jsonPartition struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"` // -1: none
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	Error           string  `json:"error,omitempty"`
}

func ids(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return slices.Clone(s)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

type jsonGroupList struct {
	Groups []jsonListedGroup `json:"groups"`
}

type jsonListedGroup struct {
	GroupID      string `json:"group_id"`
	GroupType    string `json:"group_type"` // classic, consumer, share; "" when the broker does not tell
	ProtocolType string `json:"protocol_type"`
	State        string `json:"state"`
	Coordinator  int32  `json:"coordinator"`
}

type jsonGroup struct {
	GroupID      string            `json:"group_id"`
	State        string            `json:"state"`
	ProtocolType string            `json:"protocol_type"`
	Protocol     string            `json:"protocol"`
	Coordinator  int32             `json:"coordinator"`
	Partitions   []jsonGroupOffset `json:"partitions"`
	Members      []jsonGroupMember `json:"members"`
}

// jsonShareGroup is groups describe of a share group.
type jsonShareGroup struct {
	GroupID     string               `json:"group_id"`
	GroupType   string               `json:"group_type"` // share
	State       string               `json:"state"`
	GroupEpoch  *int64               `json:"group_epoch"` // null: no members
	Coordinator int32                `json:"coordinator"`
	Partitions  []jsonSharePartition `json:"partitions"`
	Members     []jsonShareMember    `json:"members"`
}

type jsonSharePartition struct {
	Topic       string             `json:"topic"`
	Partition   int32              `json:"partition"`
	StartOffset *int64             `json:"start_offset"` // null: no state in the share coordinator
	Lag         *int64             `json:"lag"`          // null: unknown
	Leader      int32              `json:"leader"`       // -1: none known
	InFlight    *jsonShareInFlight `json:"in_flight"`    // null: not loaded on the leader, or the leader could not tell
	Error       string             `json:"error,omitempty"`
}

// jsonShareInFlight is the leader's in-memory state of a share partition
// (DescribeSharePartitions).
type jsonShareInFlight struct {
	StartOffset      int64 `json:"start_offset"`
	EndOffset        int64 `json:"end_offset"`
	Available        int32 `json:"available"`
	Acquired         int32 `json:"acquired"`
	Acknowledged     int32 `json:"acknowledged"`
	Archiving        int32 `json:"archiving"`
	Archived         int32 `json:"archived"`
	AcquiredTotal    int64 `json:"acquired_total"`
	RedeliveredTotal int64 `json:"redelivered_total"`
	ArchivedTotal    int64 `json:"archived_total"`
}

type jsonShareMember struct {
	ConsumerID string               `json:"consumer_id"`
	Host       string               `json:"host"`
	ClientID   string               `json:"client_id"`
	Assignment []jsonTopicPartition `json:"assignment"`
}

type jsonGroupOffset struct {
	Topic         string  `json:"topic"`
	Partition     int32   `json:"partition"`
	CurrentOffset *int64  `json:"current_offset"` // null: none committed
	LogEndOffset  *int64  `json:"log_end_offset"` // null: unknown
	Lag           *int64  `json:"lag"`            // null: unknown
	ConsumerID    *string `json:"consumer_id"`    // null: no member has it
	Host          *string `json:"host"`
	ClientID      *string `json:"client_id"`
	Error         string  `json:"error,omitempty"`
}

type jsonGroupMember struct {
	ConsumerID string               `json:"consumer_id"`
	InstanceID *string              `json:"group_instance_id"`
	Host       string               `json:"host"`
	ClientID   string               `json:"client_id"`
	Assignment []jsonTopicPartition `json:"assignment"`
}

type jsonTopicPartition struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

func nonNeg(o int64) *int64 {
	if o < 0 {
		return nil
	}
	return &o
}

func memberAssignment(m kadm.DescribedGroupMember) []jsonTopicPartition {
	out := []jsonTopicPartition{}
	ca, ok := m.Assigned.AsConsumer()
	if !ok {
		return out
	}
	for _, t := range ca.Topics {
		ps := slices.Clone(t.Partitions)
		slices.Sort(ps)
		out = append(out, jsonTopicPartition{Topic: t.Topic, Partitions: ids(ps)})
	}
	slices.SortFunc(out, func(a, b jsonTopicPartition) int {
		if a.Topic < b.Topic {
			return -1
		}
		if a.Topic > b.Topic {
			return 1
		}
		return 0
	})
	return out
}

type jsonUsers struct {
	Users []jsonUser `json:"users"`
}

type jsonUser struct {
	User        string           `json:"user"`
	Credentials []jsonCredential `json:"credentials"`
}

type jsonCredential struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

type jsonACLs struct {
	ACLs []jsonACL `json:"acls"`
}

// jsonACL is one binding, in Kafka's names (kafka-acls.sh's text).
type jsonACL struct {
	ResourceType   string `json:"resource_type"`
	ResourceName   string `json:"resource_name"`
	PatternType    string `json:"pattern_type"`
	Principal      string `json:"principal"`
	Host           string `json:"host"`
	Operation      string `json:"operation"`
	PermissionType string `json:"permission_type"`
}

func aclsJSON(bindings []acl.Binding) jsonACLs {
	out := jsonACLs{ACLs: []jsonACL{}}
	for _, b := range bindings {
		out.ACLs = append(out.ACLs, jsonACL{
			ResourceType:   fmt.Sprint(b.Pattern.Type),
			ResourceName:   b.Pattern.Name,
			PatternType:    fmt.Sprint(b.Pattern.Pattern),
			Principal:      b.Entry.Principal,
			Host:           b.Entry.Host,
			Operation:      fmt.Sprint(b.Entry.Operation),
			PermissionType: fmt.Sprint(b.Entry.Permission),
		})
	}
	return out
}

type jsonCluster struct {
	ClusterID  *string      `json:"cluster_id"` // null: none
	Controller int32        `json:"controller"` // -1: none
	Brokers    []jsonBroker `json:"brokers"`
}

type jsonBroker struct {
	ID   int32   `json:"id"`
	Host string  `json:"host"`
	Port int32   `json:"port"`
	Rack *string `json:"rack"`
}
