package coord

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// MetadataFile is the name of the embedded coordinator's file inside its
// directory.
const MetadataFile = "strata-metadata.json"

// fileVersion is the format version written in the metadata file. Bump it
// only with a reader for the old version.
const fileVersion = 1

// fileState is the JSON layout of MetadataFile.
type fileState struct {
	Version   int                   `json:"version"`
	ClusterID string                `json:"cluster_id"`
	Topics    map[string]*fileTopic `json:"topics"`
}

type fileTopic struct {
	ID         TopicID           `json:"id"`
	Partitions []Partition       `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// Embedded is the single-node coordinator: this broker is the only broker
// and the controller, and the metadata lives in one file in dir.
type Embedded struct {
	dir  string
	path string
	self Broker

	mu struct {
		sync.Mutex
		state  fileState
		closed bool
	}
}

var _ Metadata = (*Embedded)(nil)

// OpenEmbedded loads the metadata file in dir, or creates it (with a new
// cluster ID) if there is none. self is the one broker of the cluster. The
// second result reports whether the file already existed.
func OpenEmbedded(dir string, self Broker) (e *Embedded, existed bool, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, fmt.Errorf("coord: %w", err)
	}
	e = &Embedded{dir: dir, path: filepath.Join(dir, MetadataFile), self: self}
	b, err := os.ReadFile(e.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		st := fileState{Version: fileVersion, ClusterID: NewClusterID(), Topics: map[string]*fileTopic{}}
		if err := e.persist(&st); err != nil {
			return nil, false, err
		}
		e.mu.state = st
		return e, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("coord: %w", err)
	}
	var st fileState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, true, fmt.Errorf("coord: parse %s: %w", e.path, err)
	}
	if st.Version != fileVersion {
		return nil, true, fmt.Errorf("coord: %s has format version %d, this build reads %d", e.path, st.Version, fileVersion)
	}
	if st.ClusterID == "" {
		return nil, true, fmt.Errorf("coord: %s has no cluster id", e.path)
	}
	if st.Topics == nil {
		st.Topics = map[string]*fileTopic{}
	}
	e.mu.state = st
	return e, true, nil
}

// ClusterID implements Metadata.
func (e *Embedded) ClusterID() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.state.ClusterID
}

// Brokers implements Metadata: the one broker given to OpenEmbedded.
func (e *Embedded) Brokers() []Broker {
	b := e.self
	if b.Rack != nil {
		r := *b.Rack
		b.Rack = &r
	}
	return []Broker{b}
}

// Controller implements Metadata: this broker.
func (e *Embedded) Controller() int32 { return e.self.ID }

// Topics implements Metadata.
func (e *Embedded) Topics() []Topic {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Topic, 0, len(e.mu.state.Topics))
	for name, ft := range e.mu.state.Topics {
		out = append(out, ft.topic(name))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Topic implements Metadata.
func (e *Embedded) Topic(name string) (Topic, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ft, ok := e.mu.state.Topics[name]
	if !ok {
		return Topic{}, false
	}
	return ft.topic(name), true
}

// CreateTopic implements Metadata.
func (e *Embedded) CreateTopic(t Topic) error {
	if t.Name == "" || len(t.Partitions) == 0 || t.ID == (TopicID{}) {
		return fmt.Errorf("coord: create topic %q: name, id and partitions are required", t.Name)
	}
	return e.update(func(st *fileState) error {
		if _, ok := st.Topics[t.Name]; ok {
			return fmt.Errorf("%w: %s", ErrTopicExists, t.Name)
		}
		c := t.Clone()
		st.Topics[t.Name] = &fileTopic{ID: c.ID, Partitions: c.Partitions, Configs: c.Configs}
		return nil
	})
}

// DeleteTopic implements Metadata.
func (e *Embedded) DeleteTopic(name string) error {
	return e.update(func(st *fileState) error {
		if _, ok := st.Topics[name]; !ok {
			return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
		}
		delete(st.Topics, name)
		return nil
	})
}

// SetTopicConfig implements Metadata.
func (e *Embedded) SetTopicConfig(name string, configs map[string]string) error {
	return e.update(func(st *fileState) error {
		ft, ok := st.Topics[name]
		if !ok {
			return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
		}
		ft.Configs = make(map[string]string, len(configs))
		for k, v := range configs {
			ft.Configs[k] = v
		}
		return nil
	})
}

// AddPartitions implements Metadata.
func (e *Embedded) AddPartitions(name string, parts []Partition) error {
	if len(parts) == 0 {
		return fmt.Errorf("%w: none to add to %s", ErrInvalidPartitions, name)
	}
	return e.update(func(st *fileState) error {
		ft, ok := st.Topics[name]
		if !ok {
			return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
		}
		for _, p := range parts {
			ft.Partitions = append(ft.Partitions, p.Clone())
		}
		return nil
	})
}

// Close implements Metadata.
func (e *Embedded) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		return ErrClosed
	}
	e.mu.closed = true
	return nil
}

// update applies fn to a copy of the state, persists the copy and only
// then makes it current, so a failed write changes nothing. The lock is
// held across the write: metadata changes are rare and must be ordered.
func (e *Embedded) update(fn func(st *fileState) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		return ErrClosed
	}
	next := e.mu.state.clone()
	if err := fn(&next); err != nil {
		return err
	}
	if err := e.persist(&next); err != nil {
		return err
	}
	e.mu.state = next
	return nil
}

func (st *fileState) clone() fileState {
	c := fileState{Version: st.Version, ClusterID: st.ClusterID, Topics: make(map[string]*fileTopic, len(st.Topics))}
	for name, ft := range st.Topics {
		t := ft.topic(name)
		c.Topics[name] = &fileTopic{ID: t.ID, Partitions: t.Partitions, Configs: t.Configs}
	}
	return c
}

func (ft *fileTopic) topic(name string) Topic {
	return Topic{Name: name, ID: ft.ID, Partitions: ft.Partitions, Configs: ft.Configs}.Clone()
}

// persist writes st to the metadata file atomically.
func (e *Embedded) persist(st *fileState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("coord: encode metadata: %w", err)
	}
	return WriteFileAtomic(e.path, append(b, '\n'))
}

// WriteFileAtomic replaces path with data so that a crash leaves either the
// old or the new content: it writes a temporary file in the same
// directory, fsyncs it, renames it over path and fsyncs the directory.
// Every error, including from fsync and close, is returned.
func WriteFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("coord: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("coord: write %s: %w", tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("coord: fsync %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("coord: close %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("coord: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("coord: open dir: %w", err)
	}
	if err = d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("coord: fsync dir %s: %w", dir, err)
	}
	if err = d.Close(); err != nil {
		return fmt.Errorf("coord: close dir %s: %w", dir, err)
	}
	return nil
}
