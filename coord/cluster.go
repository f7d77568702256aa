package coord

import (
	"fmt"
	"maps"
	"slices"
)

// NoLeader is the leader of a partition that has none (offline).
const NoLeader int32 = -1

// BrokerInfo is a live broker's registration.
type BrokerInfo struct {
	ID int32
	// Host and Port are the advertised address of the broker's
	// inter-broker listener: where other brokers reach it (with
	// ReplicationPort on Host for replication).
	Host string
	Port int32
	// Endpoints are the broker's advertised listeners, each named; a
	// client is told the address on the listener it connected to. Empty
	// in a registration made before listeners had names: then Host and
	// Port serve every listener.
	Endpoints []Endpoint
	// ReplicationPort is the broker's gRPC port (replication and
	// broker-to-broker calls), on Host; 0 if it has none.
	ReplicationPort int32
	// Rack is the broker's rack (broker.rack), "" if none.
	Rack string
	// Epoch is set by Register: larger at every new registration of the
	// id. Ignored in Register's argument.
	Epoch int64
}

// Equal says a and b are the same registration.
func (a BrokerInfo) Equal(b BrokerInfo) bool {
	return a.ID == b.ID && a.Host == b.Host && a.Port == b.Port && a.ReplicationPort == b.ReplicationPort &&
		a.Rack == b.Rack && a.Epoch == b.Epoch && slices.Equal(a.Endpoints, b.Endpoints)
}

// Endpoint is one advertised listener of a broker.
type Endpoint struct {
	// Listener is the listener name (INTERNAL, EXTERNAL, PLAINTEXT...).
	Listener string
	Host     string
	Port     int32
	// SecurityProtocol is the listener's: PLAINTEXT, SSL, SASL_PLAINTEXT
	// or SASL_SSL.
	SecurityProtocol string
}

// ControllerInfo names the current controller.
type ControllerInfo struct {
	// ID is the controller's broker id, NoLeader (-1) if none.
	ID int32
	// Epoch is the controller epoch of its election.
	Epoch int32
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// PartitionState is a partition's leadership, written by the controller
// (leader changes) and by the partition's leader (ISR changes), always with
// compare-and-set on the state's version.
type PartitionState struct {
	// Leader is the leader's broker id, NoLeader if offline.
	Leader int32 `json:"leader"`
	// LeaderEpoch goes up by one at every leader change (including to
	// and from NoLeader).
	LeaderEpoch int32 `json:"leader_epoch"`
	// ISR is the in-sync replica set; never empty.
	ISR []int32 `json:"isr"`
	// ControllerEpoch is the epoch of the controller that last wrote the
	// state (kept by the leader's ISR writes).
	ControllerEpoch int32 `json:"controller_epoch"`
}

// Clone returns a deep copy.
func (s PartitionState) Clone() PartitionState {
	s.ISR = slices.Clone(s.ISR)
	return s
}

// Equal reports whether s and o are the same state.
func (s PartitionState) Equal(o PartitionState) bool {
	return s.Leader == o.Leader && s.LeaderEpoch == o.LeaderEpoch &&
		s.ControllerEpoch == o.ControllerEpoch && slices.Equal(s.ISR, o.ISR)
}

// TopicSpec is what CreateTopic needs.
type TopicSpec struct {
	Name string
	// ID is the topic's UUID; zero means "make one".
	ID TopicID
	// Assignment lists each partition's replicas, preferred leader
	// first. See AssignReplicas.
	Assignment [][]int32
	// Configs are the topic's config overrides by Kafka name.
	Configs map[string]string
}

// TopicInfo is a topic as the cache knows it.
type TopicInfo struct {
	Name string
	ID   TopicID
	// Configs are the topic's config overrides.
	Configs map[string]string
	// Partitions is indexed by partition number.
	Partitions []PartitionInfo
}

// Clone returns a deep copy.
func (t *TopicInfo) Clone() *TopicInfo {
	c := *t
	c.Configs = maps.Clone(t.Configs)
	if c.Configs == nil {
		c.Configs = map[string]string{}
	}
	c.Partitions = make([]PartitionInfo, len(t.Partitions))
	for i, p := range t.Partitions {
		c.Partitions[i] = p.Clone()
	}
	return &c
}

// Assignment returns the replica lists of all partitions.
func (t *TopicInfo) Assignment() [][]int32 {
	a := make([][]int32, len(t.Partitions))
	for i, p := range t.Partitions {
		a[i] = slices.Clone(p.Replicas)
	}
	return a
}

// PartitionInfo is one partition's assignment and state.
type PartitionInfo struct {
	// Replicas is the assignment, preferred leader first.
	Replicas []int32
	// State is the current leadership.
	State PartitionState
	// Version is the state's version for compare-and-set, -1 if the
	// partition has no state yet.
	Version int32
	// Adding and Removing are the replicas being added and removed by a
	// reassignment in progress (reassignment.go), nil when there is
	// none. Replicas then is the full set, target and original.
	Adding, Removing []int32
}

// Clone returns a deep copy.
func (p PartitionInfo) Clone() PartitionInfo {
	p.Replicas = slices.Clone(p.Replicas)
	p.Adding = slices.Clone(p.Adding)
	p.Removing = slices.Clone(p.Removing)
	p.State = p.State.Clone()
	return p
}

// StateUpdate is one compare-and-set write of a partition state.
type StateUpdate struct {
	TopicPartition
	State PartitionState
	// Version is the state's expected current version.
	Version int32
}

// StateResult is the outcome of one StateUpdate.
type StateResult struct {
	// Version is the state's new version if Err is nil.
	Version int32
	Err     error
}

// initialStates returns the states of new partitions: leader the first
// live replica, ISR the live replicas, or, with no live replica, no leader
// and the full replica list as ISR (so the first replica to return can
// lead).
func initialStates(assignment [][]int32, live func(int32) bool, controllerEpoch int32) []PartitionState {
	out := make([]PartitionState, len(assignment))
	for i, reps := range assignment {
		var isr []int32
		for _, r := range reps {
			if live(r) {
				isr = append(isr, r)
			}
		}
		st := PartitionState{Leader: NoLeader, ControllerEpoch: controllerEpoch}
		if len(isr) > 0 {
			st.Leader, st.ISR = isr[0], isr
		} else {
			st.ISR = slices.Clone(reps)
		}
		out[i] = st
	}
	return out
}

// prepare checks the spec before a topic is created from it (its name and
// assignment) and makes an ID for it if it has none.
func (s *TopicSpec) prepare() error {
	if err := validTopicName(s.Name); err != nil {
		return err
	}
	if err := validateAssignment(s.Assignment); err != nil {
		return err
	}
	if s.ID == (TopicID{}) {
		s.ID = NewTopicID()
	}
	return nil
}

// validateAssignment checks that every partition has replicas, no broker
// twice, and all partitions the same replication factor.
func validateAssignment(assignment [][]int32) error {
	if len(assignment) == 0 {
		return fmt.Errorf("%w: no partitions", ErrInvalidAssignment)
	}
	for i, reps := range assignment {
		if len(reps) == 0 {
			return fmt.Errorf("%w: partition %d has no replicas", ErrInvalidAssignment, i)
		}
		if len(reps) != len(assignment[0]) {
			return fmt.Errorf("%w: partition %d has %d replicas, partition 0 has %d", ErrInvalidAssignment, i, len(reps), len(assignment[0]))
		}
		for j, r := range reps {
			if r < 0 {
				return fmt.Errorf("%w: partition %d: broker id %d", ErrInvalidAssignment, i, r)
			}
			if slices.Contains(reps[:j], r) {
				return fmt.Errorf("%w: partition %d lists broker %d twice", ErrInvalidAssignment, i, r)
			}
		}
	}
	return nil
}

func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("coord: invalid topic name %q", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("coord: invalid topic name %q", name)
		}
	}
	return nil
}
