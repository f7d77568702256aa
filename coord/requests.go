package coord

import (
	"errors"
	"fmt"
)

// Outcomes of a preferred leader election for one partition, besides nil
// (the preferred replica now leads).
var (
	// ErrElectionNotNeeded: the preferred replica already leads.
	ErrElectionNotNeeded = errors.New("coord: preferred replica already leads")
	// ErrPreferredLeaderNotAvailable: the preferred replica is not live,
	// shutting down, or not in the ISR.
	ErrPreferredLeaderNotAvailable = errors.New("coord: preferred leader not available")
)

// RequestKind is the kind of a ControllerRequest.
type RequestKind string

// Request kinds. These strings are stored in ZooKeeper; never change them.
const (
	RequestControlledShutdown RequestKind = "controlled_shutdown"
	RequestPreferredElection  RequestKind = "preferred_election"
	RequestOfflineReplicas    RequestKind = "offline_replicas"
)

// ControllerRequest is a broker's (or an operator's) request to the
// controller, carried by the coordination service: ControlledShutdown and
// ElectPreferredLeaders create them, the controller reads them through
// Leadership.PendingRequests and answers with Leadership.Answer.
type ControllerRequest struct {
	// ID identifies the request within the coordinator (the znode name).
	ID   string
	Kind RequestKind
	// BrokerID is the broker shutting down (RequestControlledShutdown),
	// or the broker whose replicas are offline (RequestOfflineReplicas).
	BrokerID int32
	// Partitions to elect (RequestPreferredElection; empty means all),
	// or the broker's offline replicas (RequestOfflineReplicas).
	Partitions []TopicPartition
	// Answered is true once the controller answered. An answered
	// controlled shutdown or offline-replica report stays pending while
	// its requester's session lives, so every controller keeps the
	// broker (or those replicas) out of leadership and the ISR.
	Answered bool
}

// RequestAnswer is the controller's answer to a request.
type RequestAnswer struct {
	// Remaining lists the partitions the broker still leads
	// (RequestControlledShutdown; RequestOfflineReplicas: of those
	// reported, which can only be when their state writes failed).
	Remaining []TopicPartition
	// Results has one entry per partition (RequestPreferredElection).
	Results []ElectionResult
}

// ElectionResult is one partition's outcome of a preferred election: Err is
// nil (elected), ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable,
// ErrUnknownTopic, ErrUnknownPartition, or another error (for example
// ErrVersionConflict: retry).
type ElectionResult struct {
	TopicPartition
	Err error
}

func (r ElectionResult) String() string { return fmt.Sprintf("%s: %v", r.TopicPartition, r.Err) }

// Error codes of ElectionResult.Err as stored in ZooKeeper; never change
// them.
var electionCodes = []struct {
	code string
	err  error
}{
	{"election_not_needed", ErrElectionNotNeeded},
	{"preferred_leader_not_available", ErrPreferredLeaderNotAvailable},
	{"unknown_topic", ErrUnknownTopic},
	{"unknown_partition", ErrUnknownPartition},
	{"version_conflict", ErrVersionConflict},
	{"not_controller", ErrNotController},
	{"unavailable", ErrUnavailable},
}

func errorCode(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range electionCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "error: " + err.Error()
}

func codeError(code string) error {
	if code == "" {
		return nil
	}
	for _, c := range electionCodes {
		if c.code == code {
			return c.err
		}
	}
	return fmt.Errorf("coord: controller: %s", code)
}

// wire forms, shared by ZK (znode JSON) and Local (in memory, to keep the
// same copying semantics).
type wireRequest struct {
	Version    int                `json:"version"`
	Kind       RequestKind        `json:"kind"`
	BrokerID   int32              `json:"broker_id"`
	Partitions []TopicPartition   `json:"partitions,omitempty"`
	Answer     *wireRequestAnswer `json:"answer,omitempty"`
}

type wireRequestAnswer struct {
	ControllerEpoch int32            `json:"controller_epoch"`
	Remaining       []TopicPartition `json:"remaining"`
	Results         []wireResult     `json:"results,omitempty"`
}

type wireResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Error     string `json:"error,omitempty"`
}

func answerToWire(epoch int32, a RequestAnswer) *wireRequestAnswer {
	w := &wireRequestAnswer{ControllerEpoch: epoch, Remaining: a.Remaining}
	if w.Remaining == nil {
		w.Remaining = []TopicPartition{}
	}
	for _, r := range a.Results {
		w.Results = append(w.Results, wireResult{Topic: r.Topic, Partition: r.Partition, Error: errorCode(r.Err)})
	}
	return w
}

func (w *wireRequestAnswer) answer() RequestAnswer {
	a := RequestAnswer{Remaining: w.Remaining}
	for _, r := range w.Results {
		a.Results = append(a.Results, ElectionResult{TopicPartition{r.Topic, r.Partition}, codeError(r.Error)})
	}
	return a
}
