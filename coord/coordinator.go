package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Errors of Coordinator and Leadership. Callers test them with errors.Is;
// the returned errors wrap them with the operation and cause.
var (
	// ErrUnavailable means the coordination service (ZooKeeper) could not
	// be reached or the session is not established. For a write the
	// outcome is unknown: it may or may not have been applied. Re-read
	// and retry (compare-and-set writes are safe to retry that way).
	// Snapshot stays readable meanwhile.
	ErrUnavailable = errors.New("coord: coordination service unavailable")
	// ErrBrokerIDInUse is returned by Register when another live session
	// holds the broker id's registration. The broker must not start.
	ErrBrokerIDInUse = errors.New("coord: broker id already registered")
	// ErrNotRegistered is returned by calls that need this session's
	// broker registration (ControlledShutdown) before Register.
	ErrNotRegistered = errors.New("coord: broker not registered")
	// ErrNotController is returned by Leadership writes once the
	// leadership is lost: another controller was elected (the controller
	// epoch moved on), the session expired, or Resign was called. The
	// controller must stop acting and campaign again.
	ErrNotController = errors.New("coord: not the controller")
	// ErrVersionConflict is returned by compare-and-set writes whose
	// expected version is not the current one: someone else wrote first.
	// Nothing was written; re-read and decide again.
	ErrVersionConflict = errors.New("coord: version conflict")
	// ErrUnknownPartition is returned for a partition number the topic
	// does not have.
	ErrUnknownPartition = errors.New("coord: unknown partition")
	// ErrTopicDeletionPending is wrapped with ErrTopicExists by CreateTopic
	// while a topic of that name is still being deleted.
	ErrTopicDeletionPending = errors.New("coord: topic is marked for deletion")
	// ErrInvalidAssignment is returned for a replica assignment that
	// cannot be used: empty, duplicate brokers in a partition, a
	// replication factor larger than the live brokers, racks on some
	// brokers only.
	ErrInvalidAssignment = errors.New("coord: invalid replica assignment")
)

// Coordinator is one broker's session with the cluster's coordination
// service: the cluster ID, the broker registry, controller election, topics
// and their partition state, and a cache of all of it kept current by
// watches. Two implementations pass one contract test suite: ZK (ZooKeeper,
// see doc.go for the znode layout) and Local (embedded, single node, state
// in the data directory).
//
// Durability: a mutating method returns nil only after the change is
// durable in the service (ZooKeeper acknowledged it, which means a quorum
// logged and fsynced it; Local fsynced its file and directory). When it
// returns an error other than ErrUnavailable (or a context error), nothing
// was changed. ErrUnavailable and context errors leave a write's outcome
// unknown.
//
// Ephemeral state (the broker registration, the controller znode, pending
// controller requests) lives as long as the session. A session ends on
// Close, or expires when the service does not hear from the client for the
// session timeout; the implementation then opens a new session by itself,
// registers the broker again (new broker epoch), and ends any Leadership.
//
// Read-your-writes: after a mutating method returns nil, Snapshot reflects
// the change. Other sessions see it once their watches fire, normally
// within milliseconds. While the service is unreachable Snapshot keeps
// returning the last known state, with Connected false.
//
// All methods are safe for concurrent use.
type Coordinator interface {
	// ScramStore holds users' SCRAM credentials (users.go).
	ScramStore
	ACLStore
	// TokenStore holds delegation tokens (tokens.go).
	TokenStore

	// EntityConfigStore holds Kafka's /config/<type>/<name> entity
	// configs: the dynamic broker configs (entity_config.go).
	EntityConfigStore

	// FeatureStore holds the finalized features (features.go).
	FeatureStore

	// ClusterID is the cluster's ID, created by the first broker that
	// ever opened the cluster and never changed after. It is read when
	// the coordinator is opened.
	ClusterID() string

	// Register announces this broker as live with an ephemeral
	// registration and returns its broker epoch (larger at every new
	// registration of the id: ZooKeeper's czxid of the registration
	// znode, a persisted counter for Local). If another session holds
	// the id, Register waits up to the session timeout (plus 2s of grace,
	// for ZooKeeper) for it to go away (a broker restarted after kill -9
	// finds its old registration until the old session expires) and then
	// fails with ErrBrokerIDInUse; a
	// second live broker with the same id is refused that way. After a
	// session expiry the registration is renewed automatically (an
	// EventSessionExpired follows; EventRegistrationLost if the renewal
	// was refused). Calling Register again replaces the info.
	Register(ctx context.Context, b BrokerInfo) (epoch int64, err error)

	// Deregister removes this session's registration, if any. Other
	// brokers see the broker leave at once instead of after the session
	// timeout. Close does it too.
	Deregister(ctx context.Context) error

	// Snapshot returns the last known cluster state. It never blocks on
	// the network. The returned value is shared and must not be modified.
	Snapshot() *Snapshot

	// Subscribe returns the current snapshot and a subscription that
	// delivers, in order and without loss, one Event per change after
	// that snapshot. The subscriber must drain Events or Close the
	// subscription (events queue in memory).
	Subscribe() (*Snapshot, *Subscription)

	// Campaign blocks until this session is elected controller, then
	// returns its Leadership. The controller epoch is incremented in the
	// same atomic write that takes the controller role. It fails with
	// the context's error when ctx ends first, or ErrClosed.
	Campaign(ctx context.Context, brokerID int32) (Leadership, error)

	// CreateTopic creates a topic with its replica assignment, configs
	// and initial partition states in one atomic write: each partition's
	// leader is its first live replica and its ISR the live replicas
	// (leader -1 and the full replica list if none is live), leader epoch
	// 0. A zero spec.ID is replaced by a new one. Errors: ErrTopicExists
	// (also while a deletion of the name is pending, with
	// ErrTopicDeletionPending), ErrInvalidAssignment.
	CreateTopic(ctx context.Context, spec TopicSpec) (TopicInfo, error)

	// AddPartitions appends partitions numbered from first (which must be
	// the topic's current partition count, or ErrInvalidPartitions) with
	// the given assignment and initial states as in CreateTopic.
	// Concurrent additions: one wins, the other gets
	// ErrInvalidPartitions. Errors: ErrUnknownTopic, ErrInvalidAssignment.
	AddPartitions(ctx context.Context, topic string, first int32, assignment [][]int32) error

	// SetTopicConfig replaces the topic's config overrides (nil or empty
	// removes them all). Validation is the caller's job. Errors:
	// ErrUnknownTopic.
	SetTopicConfig(ctx context.Context, topic string, configs map[string]string) error

	// DeleteTopic deletes a topic: it first records a pending-deletion
	// marker, then removes the topic's partition states and topic, and
	// the marker last. A crash half-way leaves the marker; the next
	// active controller finishes the deletion. From the marker on the
	// topic is absent from Snapshot().Topics and listed in
	// PendingDeletion. Brokers delete their local logs of a topic when it
	// leaves Topics (match by topic ID). Errors: ErrUnknownTopic.
	DeleteTopic(ctx context.Context, topic string) error

	// PartitionState reads a partition's state and its version from the
	// service itself, not from the cache. Errors: ErrUnknownTopic,
	// ErrUnknownPartition.
	PartitionState(ctx context.Context, topic string, partition int32) (PartitionState, int32, error)

	// UpdatePartitionState writes a partition's state if its current
	// version is version, and returns the new version. It is how a
	// partition leader changes the ISR. Errors: ErrVersionConflict,
	// ErrUnknownTopic, ErrUnknownPartition.
	UpdatePartitionState(ctx context.Context, topic string, partition int32, st PartitionState, version int32) (int32, error)

	// ControlledShutdown asks the controller to move leadership away from
	// brokerID (this session's registered broker) and to take it out of
	// every ISR, and waits for the controller's answer: the partitions it
	// still leads because no other in-sync replica is live. The request
	// lives as long as this session; while it does, the controller does
	// not elect the broker leader. Errors: ErrNotRegistered,
	// ErrUnavailable, the context's error when no controller answers.
	ControlledShutdown(ctx context.Context, brokerID int32) (remaining []TopicPartition, err error)

	// ReportOfflineReplicas tells the controller that brokerID (this
	// session's registered broker) can no longer serve its replicas of
	// partitions: their log directory failed (Kafka's log-dir event,
	// KIP-112). The report lives as long as this session; while it does,
	// the controller treats those replicas as offline: they lose
	// leadership to another in-sync replica and leave the ISR. It waits
	// for the controller's answer: the reported partitions the broker
	// still leads (none once the controller acted). Reports add up: each
	// call may name only the newly offline replicas. Errors:
	// ErrNotRegistered, ErrUnavailable, the context's error when no
	// controller answers (the report stays filed for the next one).
	ReportOfflineReplicas(ctx context.Context, brokerID int32, partitions []TopicPartition) (remaining []TopicPartition, err error)

	// AlterPartitionReassignments starts, replaces or cancels (nil
	// Target) partition reassignments, Kafka's AlterPartitionReassignments
	// (reassignment.go has the model). Each topic's changes are written
	// with compare-and-set on the topic's assignment, in the same write
	// as the assignment itself, so the controller (and its successor
	// after a failover) drives them from there. One error per change, nil
	// when stored: ErrUnknownTopic, ErrUnknownPartition,
	// ErrInvalidAssignment (empty, duplicate or negative replicas, a new
	// replica on a broker that is not live), ErrNoReassignmentInProgress
	// (cancel), ErrUnavailable or the context's error.
	AlterPartitionReassignments(ctx context.Context, changes []ReassignmentChange) []error

	// ElectPreferredLeaders asks the controller to make each partition's
	// preferred replica (the first in its assignment) its leader, and
	// waits for the answer: one result per partition (all partitions when
	// partitions is empty). Errors: ErrUnavailable, the context's error.
	ElectPreferredLeaders(ctx context.Context, partitions []TopicPartition) ([]ElectionResult, error)

	// Close ends the session: ephemeral state (registration, controller
	// role, pending requests) goes away, subscriptions end, later calls
	// fail with ErrClosed.
	Close() error
}

// Leadership is a won controller election. Its writes are fenced: each is
// conditional on the controller epoch still being this one, so a deposed
// controller's writes fail with ErrNotController and change nothing.
type Leadership interface {
	// Epoch is the controller epoch this election produced.
	Epoch() int32

	// Done is closed when the leadership is lost (session expiry,
	// another controller seen, Resign, Close). Writes fail from then on.
	Done() <-chan struct{}

	// UpdatePartitionStates writes each update with compare-and-set on
	// its version, fenced by the controller epoch. Results are per
	// update (ErrVersionConflict, ErrUnknownTopic, ErrUnknownPartition);
	// err is ErrNotController if the leadership is lost (updates after
	// the loss were not written), or ErrUnavailable.
	UpdatePartitionStates(ctx context.Context, updates []StateUpdate) (results []StateResult, err error)

	// PendingRequests lists the controller requests (controlled shutdown,
	// preferred election) not yet answered, and the controlled shutdowns
	// already answered whose brokers are still registered.
	PendingRequests(ctx context.Context) ([]ControllerRequest, error)

	// Answer records the answer to a request, fenced by the epoch. The
	// requester is waiting for it.
	Answer(ctx context.Context, req ControllerRequest, ans RequestAnswer) error

	// CompleteReassignment ends tp's reassignment: if its replicas are
	// still replicas and it is being reassigned to target, they become
	// target and the adding and removing sets are cleared; with state,
	// the partition state is written (compare-and-set on its version) in
	// the same atomic, epoch-fenced write, and version is its new version.
	// Errors: ErrVersionConflict (the reassignment or the state changed
	// meanwhile: nothing was written), ErrUnknownTopic,
	// ErrUnknownPartition, ErrNotController, ErrUnavailable.
	CompleteReassignment(ctx context.Context, tp TopicPartition, replicas, target []int32, state *StateUpdate) (version int32, err error)

	// FinishTopicDeletion completes the deletion of a topic whose
	// pending-deletion marker exists: removes what is left of the topic
	// and then the marker. Idempotent.
	FinishTopicDeletion(ctx context.Context, topic string) error

	// Resign gives the role up: the controller znode is removed (fenced)
	// and Done closed.
	Resign(ctx context.Context) error
}

// term is what both implementations of Leadership hold of a won
// election: its epoch, and the channel Done returns, closed once by end.
type term struct {
	epoch int32
	done  chan struct{}
	once  sync.Once
}

func (t *term) end() { t.once.Do(func() { close(t.done) }) }

// Epoch implements Leadership.
func (t *term) Epoch() int32 { return t.epoch }

// Done implements Leadership.
func (t *term) Done() <-chan struct{} { return t.done }

// Config selects and tunes a Coordinator for Open.
type Config struct {
	// ZooKeeperConnect is Kafka's zookeeper.connect:
	// "host:port[,host:port...][/chroot]". The chroot defaults to
	// /strata and is created if missing. Empty selects the embedded
	// single-node coordinator in DataDir.
	ZooKeeperConnect string
	// SessionTimeout is zookeeper.session.timeout.ms. Default 18s.
	SessionTimeout time.Duration
	// ConnectTimeout (zookeeper.connection.timeout.ms) bounds how long
	// Open waits for the first session. Default: SessionTimeout.
	ConnectTimeout time.Duration
	// DataDir holds the embedded coordinator's file (MetadataFile).
	DataDir string
	// Logger receives the coordinator's logs. Default slog.Default().
	Logger *slog.Logger
}

// DefaultSessionTimeout is zookeeper.session.timeout.ms's default.
const DefaultSessionTimeout = 18 * time.Second

func (c *Config) defaults() {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = c.SessionTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Open returns the Coordinator cfg selects: ZooKeeper when
// ZooKeeperConnect is set, else the embedded one in DataDir (its Close
// also closes the store).
func Open(ctx context.Context, cfg Config) (Coordinator, error) {
	if cfg.ZooKeeperConnect != "" {
		return DialZK(ctx, cfg)
	}
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("coord: neither zookeeper.connect nor a data directory given")
	}
	cfg.defaults()
	st, err := OpenLocal(cfg.DataDir, cfg.Logger)
	if err != nil {
		return nil, err
	}
	s := st.Connect()
	s.ownsStore = true
	return s, nil
}
