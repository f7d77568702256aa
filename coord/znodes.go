package coord

import (
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// Znode paths under the chroot, and the JSON each holds (doc.go shows the
// layout). Every JSON value has a "version" field, 1 today; a reader
// refuses versions it does not know. These names and fields are stored
// in ZooKeeper: never change them, only add.
const (
	zClusterID       = "cluster/id"
	zBrokerIDs       = "brokers/ids"
	zController      = "controller"
	zControllerEpoch = "controller_epoch"
	zTopics          = "topics"
	zDeleteTopics    = "admin/delete_topics"
	zRequests        = "admin/controller_requests"
	zRequestPrefix   = "req-"
)

// zBaseNodes are created (persistent, empty) when missing, parents first.
var zBaseNodes = []string{"cluster", "brokers", zBrokerIDs, zTopics, "admin", zDeleteTopics, zRequests}

func zBroker(id int32) string          { return zBrokerIDs + "/" + strconv.Itoa(int(id)) }
func zTopic(name string) string        { return zTopics + "/" + name }
func zPartitions(name string) string   { return zTopics + "/" + name + "/partitions" }
func zDeleteMarker(name string) string { return zDeleteTopics + "/" + name }
func zPartition(name string, p int32) string {
	return zPartitions(name) + "/" + strconv.Itoa(int(p))
}
func zState(name string, p int32) string { return zPartition(name, p) + "/state" }

const znodeVersion = 1

type zClusterIDData struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
}

type zBrokerData struct {
	Version         int    `json:"version"`
	Host            string `json:"host"`
	Port            int32  `json:"port"`
	ReplicationPort int32  `json:"replication_port"`
	Rack            string `json:"rack,omitempty"`
	Timestamp       string `json:"timestamp"`
	// Endpoints and ListenerSecurityProtocolMap are the advertised
	// listeners as Kafka registers them: "NAME://host:port" and
	// NAME -> protocol. Absent in older registrations.
	Endpoints                   []string          `json:"endpoints,omitempty"`
	ListenerSecurityProtocolMap map[string]string `json:"listener_security_protocol_map,omitempty"`
}

// encodeEndpoints renders b's endpoints into d.
func (d *zBrokerData) encodeEndpoints(eps []Endpoint) {
	if len(eps) == 0 {
		return
	}
	d.ListenerSecurityProtocolMap = map[string]string{}
	for _, e := range eps {
		d.Endpoints = append(d.Endpoints, e.Listener+"://"+net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
		d.ListenerSecurityProtocolMap[e.Listener] = e.SecurityProtocol
	}
}

// decodeEndpoints parses the registration's endpoints; one that does
// not parse is an error (the registration is then ignored, as any
// undecodable one).
func (d *zBrokerData) decodeEndpoints() ([]Endpoint, error) {
	var out []Endpoint
	for _, s := range d.Endpoints {
		name, hp, ok := strings.Cut(s, "://")
		host, port, err := net.SplitHostPort(hp)
		p, perr := strconv.ParseUint(port, 10, 16)
		if !ok || name == "" || err != nil || perr != nil {
			return nil, fmt.Errorf("bad endpoint %q", s)
		}
		proto := d.ListenerSecurityProtocolMap[name]
		if proto == "" {
			proto = "PLAINTEXT"
		}
		out = append(out, Endpoint{Listener: name, Host: host, Port: int32(p), SecurityProtocol: proto})
	}
	return out, nil
}

type zControllerData struct {
	Version   int    `json:"version"`
	BrokerID  int32  `json:"broker_id"`
	Epoch     int32  `json:"epoch"`
	Timestamp string `json:"timestamp"`
}

type zControllerEpochData struct {
	Version int   `json:"version"`
	Epoch   int32 `json:"epoch"`
}

type zTopicData struct {
	Version    int                `json:"version"`
	ID         TopicID            `json:"id"`
	Partitions map[string][]int32 `json:"partitions"`
	Configs    map[string]string  `json:"configs"`
	// AddingReplicas and RemovingReplicas are the reassignments in
	// progress, by partition, with Kafka's field names
	// (reassignment.go). Absent when none is.
	AddingReplicas   map[string][]int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas map[string][]int32 `json:"removing_replicas,omitempty"`
}

type zStateData struct {
	Version int `json:"version"`
	PartitionState
}

type zDeleteMarkerData struct {
	Version int     `json:"version"`
	TopicID TopicID `json:"topic_id"`
}

func encodeZ(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("coord: encode znode: " + err.Error()) // only our own types
	}
	return b
}

// decodeZ parses a znode's JSON and checks its version.
func decodeZ(path string, b []byte, v any) error {
	var hdr struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil {
		return fmt.Errorf("coord: znode %s: %w", path, err)
	}
	if hdr.Version != znodeVersion {
		return fmt.Errorf("coord: znode %s has version %d, this build reads %d", path, hdr.Version, znodeVersion)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("coord: znode %s: %w", path, err)
	}
	return nil
}

func topicData(id TopicID, assignment [][]int32, configs map[string]string) zTopicData {
	d := zTopicData{Version: znodeVersion, ID: id, Partitions: map[string][]int32{}, Configs: configs}
	if d.Configs == nil {
		d.Configs = map[string]string{}
	}
	for i, r := range assignment {
		d.Partitions[strconv.Itoa(i)] = r
	}
	return d
}

// withReassignments returns d with the reassignment sets of partitions
// (indexed by partition number), none when no partition has one.
func (d zTopicData) withReassignments(partitions []PartitionInfo) zTopicData {
	d.AddingReplicas, d.RemovingReplicas = nil, nil
	for i, p := range partitions {
		k := strconv.Itoa(i)
		if len(p.Adding) > 0 {
			if d.AddingReplicas == nil {
				d.AddingReplicas = map[string][]int32{}
			}
			d.AddingReplicas[k] = p.Adding
		}
		if len(p.Removing) > 0 {
			if d.RemovingReplicas == nil {
				d.RemovingReplicas = map[string][]int32{}
			}
			d.RemovingReplicas[k] = p.Removing
		}
	}
	return d
}

// partitionInfos returns the topic's assignment with its reassignments
// (no states).
func (d *zTopicData) partitionInfos(asg [][]int32) []PartitionInfo {
	out := make([]PartitionInfo, len(asg))
	for i, r := range asg {
		k := strconv.Itoa(i)
		out[i] = PartitionInfo{Replicas: r, Adding: d.AddingReplicas[k], Removing: d.RemovingReplicas[k]}
	}
	return out
}

// assignment returns the topic's replica lists in partition order; the
// partition numbers must be 0..n-1.
func (d *zTopicData) assignment(path string) ([][]int32, error) {
	keys := make([]int, 0, len(d.Partitions))
	for k := range d.Partitions {
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("coord: znode %s: bad partition %q", path, k)
		}
		keys = append(keys, n)
	}
	sort.Ints(keys)
	out := make([][]int32, len(keys))
	for i, n := range keys {
		if n != i {
			return nil, fmt.Errorf("coord: znode %s: partitions are not numbered 0..%d", path, len(keys)-1)
		}
		out[i] = d.Partitions[strconv.Itoa(n)]
	}
	return out, nil
}
