package coord

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/stratastream/strata/segment/atomicfile"
)

// MetadataFile is the name of the embedded coordinator's file inside its
// directory.
const MetadataFile = "strata-metadata.json"

// localFileVersion is the format Local writes. It reads version 1 (the
// file of the single-node broker before clustering) and 2. Bump only with a reader for the old one.
const localFileVersion = 2

// localFile is the JSON layout of MetadataFile as Local writes it (see
// doc.go). Ephemeral state (registrations, controller, requests) is not
// in it.
type localFile struct {
	Version         int                    `json:"version"`
	ClusterID       string                 `json:"cluster_id"`
	ControllerEpoch int32                  `json:"controller_epoch"`
	BrokerEpoch     int64                  `json:"broker_epoch"`
	Topics          map[string]*localTopic `json:"topics"`
	PendingDeletion map[string]TopicID     `json:"pending_deletion,omitempty"`
	// Users are user configs (SCRAM credentials), see local_users.go.
	Users map[string]map[string]string `json:"users,omitempty"`
	// Tokens are delegation tokens, see local_tokens.go.
	Tokens map[string]DelegationToken `json:"delegation_tokens,omitempty"`
	// Configs are the entity configs of the other entity types (entity
	// type to entity name to config), see local_config.go.
	Configs map[string]map[string]map[string]string `json:"configs,omitempty"`
	// Features are the finalized features and FeaturesEpoch their
	// epoch (from 1; 0 with no features: a file written before them),
	// see local_features.go.
	Features      map[string]int16 `json:"features,omitempty"`
	FeaturesEpoch int64            `json:"features_epoch,omitempty"`
}

type localTopic struct {
	ID         TopicID           `json:"id"`
	Partitions []localPartition  `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// localPartition extends version 1's partition (replicas, isr, leader,
// leader_epoch) with the controller epoch and the state's version.
type localPartition struct {
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ControllerEpoch int32   `json:"controller_epoch"`
	Version         int32   `json:"version"`
	// Adding and Removing are a reassignment in progress
	// (reassignment.go).
	Adding   []int32 `json:"adding_replicas,omitempty"`
	Removing []int32 `json:"removing_replicas,omitempty"`
}

// LocalStore is the embedded coordination service of a single-node
// cluster (strata broker without zookeeper.connect). Persistent state
// lives in one file in the data directory, MetadataFile, replaced
// atomically at every change; ephemeral state (registrations, the
// controller role, pending controller requests) lives in memory, per
// session. Sessions (Connect) implement Coordinator with the same
// semantics as ZooKeeper sessions, so the one broker runs the same code
// as in a cluster, and tests can run several sessions against one store.
//
// Lock order: LocalStore.mu, then a session hub's lock. The file is
// written with mu held: metadata changes are rare and must be ordered.
type LocalStore struct {
	dir, path string
	log       *slog.Logger

	// hookAfterMarker, if set, runs in DeleteTopic after the marker is
	// persisted; an error stops the deletion there (crash tests).
	hookAfterMarker func() error

	// acls are the ACLs (local_acls.go), in ACLFile; written with mu held.
	acls *aclTable

	// configWatchers hear of every entity config change (local_config.go).
	configWatchers entityWatchers
	// featureWatchers hear of every finalized feature change
	// (local_features.go).
	featureWatchers entityWatchers

	mu struct {
		sync.Mutex
		file       localFile
		topics     map[string]*TopicInfo // built from file, immutable values
		brokers    map[int32]*localReg
		controller *LocalSession
		ctrlID     int32
		requests   map[string]*localRequest
		nextReq    int
		sessions   map[*LocalSession]struct{}
		changed    chan struct{} // closed and replaced at every change
		closed     bool
	}
}

type localReg struct {
	info  BrokerInfo
	owner *LocalSession
}

type localRequest struct {
	id    string
	owner *LocalSession
	wire  wireRequest
}

// OpenLocal loads dir/MetadataFile (format 1 or 2), or creates it with a
// new cluster ID.
func OpenLocal(dir string, log *slog.Logger) (*LocalStore, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("coord: %w", err)
	}
	s := &LocalStore{dir: dir, path: filepath.Join(dir, MetadataFile), log: log}
	s.mu.brokers = map[int32]*localReg{}
	s.mu.requests = map[string]*localRequest{}
	s.mu.sessions = map[*LocalSession]struct{}{}
	s.mu.changed = make(chan struct{})
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f := localFile{Version: localFileVersion, ClusterID: NewClusterID(), Topics: map[string]*localTopic{},
			Features: maps.Clone(NewClusterFeatures), FeaturesEpoch: 1}
		if err := s.persist(&f); err != nil {
			return nil, err
		}
		s.mu.file = f
	case err != nil:
		return nil, fmt.Errorf("coord: %w", err)
	default:
		var f localFile
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, fmt.Errorf("coord: parse %s: %w", s.path, err)
		}
		if f.Version != 1 && f.Version != localFileVersion {
			return nil, fmt.Errorf("coord: %s has format version %d, this build reads 1 and %d", s.path, f.Version, localFileVersion)
		}
		if f.ClusterID == "" {
			return nil, fmt.Errorf("coord: %s has no cluster id", s.path)
		}
		if f.Topics == nil {
			f.Topics = map[string]*localTopic{}
		}
		f.Version = localFileVersion
		s.mu.file = f
	}
	if s.acls, err = loadLocalACLs(dir); err != nil {
		return nil, err
	}
	s.mu.topics = map[string]*TopicInfo{}
	for name, lt := range s.mu.file.Topics {
		s.mu.topics[name] = lt.info(name)
	}
	return s, nil
}

// Close ends every session and releases the store.
func (s *LocalStore) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	sessions := slices.Collect(maps.Keys(s.mu.sessions))
	s.mu.Unlock()
	for _, ss := range sessions {
		_ = ss.Close()
	}
	s.mu.Lock()
	s.mu.closed = true
	close(s.mu.changed)
	s.mu.Unlock()
	return nil
}

// Connect opens a new session.
func (s *LocalStore) Connect() *LocalSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := &LocalSession{store: s}
	ss.hub = newHub(s.snapshotLocked(true))
	if !s.mu.closed {
		s.mu.sessions[ss] = struct{}{}
	} else {
		ss.mu.closed = true
	}
	return ss
}

func (lt *localTopic) info(name string) *TopicInfo {
	t := &TopicInfo{Name: name, ID: lt.ID, Configs: maps.Clone(lt.Configs), Partitions: make([]PartitionInfo, len(lt.Partitions))}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	for i, p := range lt.Partitions {
		t.Partitions[i] = PartitionInfo{
			Replicas: slices.Clone(p.Replicas),
			State:    PartitionState{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ISR: slices.Clone(p.ISR), ControllerEpoch: p.ControllerEpoch},
			Version:  p.Version,
			Adding:   slices.Clone(p.Adding),
			Removing: slices.Clone(p.Removing),
		}
	}
	return t
}

func topicToLocal(t *TopicInfo) *localTopic {
	lt := &localTopic{ID: t.ID, Configs: maps.Clone(t.Configs), Partitions: make([]localPartition, len(t.Partitions))}
	for i, p := range t.Partitions {
		lt.Partitions[i] = localPartition{
			Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.State.ISR),
			Leader: p.State.Leader, LeaderEpoch: p.State.LeaderEpoch,
			ControllerEpoch: p.State.ControllerEpoch, Version: p.Version,
			Adding: slices.Clone(p.Adding), Removing: slices.Clone(p.Removing),
		}
	}
	return lt
}

// snapshotLocked builds the snapshot every connected session sees.
func (s *LocalStore) snapshotLocked(connected bool) *Snapshot {
	snap := emptySnapshot(s.mu.file.ClusterID)
	snap.Connected = connected
	for _, r := range s.mu.brokers {
		snap.Brokers = append(snap.Brokers, r.info)
	}
	slices.SortFunc(snap.Brokers, func(a, b BrokerInfo) int { return int(a.ID) - int(b.ID) })
	if s.mu.controller != nil {
		snap.Controller = ControllerInfo{ID: s.mu.ctrlID, Epoch: s.mu.file.ControllerEpoch}
	}
	maps.Copy(snap.Topics, s.mu.topics)
	maps.Copy(snap.PendingDeletion, s.mu.file.PendingDeletion)
	return snap
}

// publishLocked wakes waiters and sends the new state to every connected
// session, with extra events.
func (s *LocalStore) publishLocked(extra ...Event) {
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
	for ss := range s.mu.sessions {
		if !ss.mu.partitioned {
			ss.hub.publish(s.snapshotLocked(true), extra...)
		}
	}
}

// persistLocked writes the persistent state (the topics from
// s.mu.topics) to the file.
func (s *LocalStore) persistLocked(f *localFile, topics map[string]*TopicInfo) error {
	f.Topics = make(map[string]*localTopic, len(topics))
	for name, t := range topics {
		f.Topics[name] = topicToLocal(t)
	}
	return s.persist(f)
}

// persist writes f to the file. Callers hold s.mu, or have s to
// themselves (OpenLocal), so writes never overlap, as atomicfile.WriteFile
// requires.
func (s *LocalStore) persist(f *localFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("coord: encode metadata: %w", err)
	}
	if err := atomicfile.WriteFile(s.path, append(b, '\n'), 0o600 /* owner only */); err != nil {
		return fmt.Errorf("coord: persist metadata: %w", err)
	}
	return nil
}

// mutateLocked applies fn to copies of the persistent state, persists the
// result and only then makes it current and publishes it, so a failed
// write changes nothing.
func (s *LocalStore) mutateLocked(fn func(f *localFile, topics map[string]*TopicInfo) error) error {
	f := s.mu.file
	f.PendingDeletion = maps.Clone(s.mu.file.PendingDeletion)
	if f.PendingDeletion == nil {
		f.PendingDeletion = map[string]TopicID{}
	}
	topics := maps.Clone(s.mu.topics)
	if err := fn(&f, topics); err != nil {
		return err
	}
	if len(f.PendingDeletion) == 0 {
		f.PendingDeletion = nil
	}
	if err := s.persistLocked(&f, topics); err != nil {
		return err
	}
	s.mu.file = f
	s.mu.topics = topics
	s.publishLocked()
	return nil
}

// liveLocked reports whether broker id is registered.
func (s *LocalStore) liveLocked(id int32) bool {
	_, ok := s.mu.brokers[id]
	return ok
}

// dropEphemeralsLocked removes what session ss owns: its registration,
// the controller role and its requests. It reports whether anything went.
func (s *LocalStore) dropEphemeralsLocked(ss *LocalSession) bool {
	dropped := false
	for id, r := range s.mu.brokers {
		if r.owner == ss {
			delete(s.mu.brokers, id)
			dropped = true
		}
	}
	if s.mu.controller == ss {
		s.mu.controller = nil
		dropped = true
	}
	for id, r := range s.mu.requests {
		if r.owner == ss {
			delete(s.mu.requests, id)
			dropped = true
		}
	}
	if l := ss.mu.lead; l != nil {
		l.end()
		ss.mu.lead = nil
	}
	return dropped
}
