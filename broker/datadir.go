package broker

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/atomicfile"
)

// This file holds what the broker keeps in its data directory besides the
// partition logs, and the checks it makes on it at start:
//
// Each directory of log.dirs (logdirs.go) has
//
//	<log.dir>/.lock                  flock: one broker per directory
//	<log.dir>/meta.properties        the cluster and broker the directory
//	                                 belongs to (Kafka's file and keys):
//	                                     version=0
//	                                     broker.id=1
//	                                     cluster.id=<22 chars>
//	<log.dir>/<topic>-<n>/partition.metadata
//	                                 the topic ID of the partition's log
//	                                 (Kafka's file and keys):
//	                                     version: 0
//	                                     topic_id: <22 chars, URL-safe base64>
//
// and the first of them (Config.MetaDir) also
//
//	<log.dir>/strata-metadata.json   the embedded coordinator's state
//	                                 (single node only; see package coord)
//	<log.dir>/producer-id-block      the producer ids handed out (package producer)
//
// meta.properties stops a broker from joining another cluster, or taking
// another broker id, with logs that belong elsewhere. partition.metadata
// tells a log of a deleted topic from the log of a topic created again
// under the same name while the broker was down. Directories written
// before these files existed are adopted: the files are written at the
// next start. Both files are written atomically (temp file, fsync, rename,
// fsync directory).

// Names of the files above.
const (
	metaPropertiesFile    = "meta.properties"
	partitionMetadataFile = "partition.metadata"
)

// lockDir takes an exclusive, non-blocking flock on dir/.lock so two
// brokers never share a data directory.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: lock data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("broker: data directory %s is in use by another broker: %w", dir, err)
	}
	return f, nil
}

// readProperties reads meta.properties or partition.metadata, in the
// Java properties format Kafka writes them in (ReadPropertiesFile).
// Trailing spaces, which a hand edit may leave, are dropped from values.
func readProperties(path string) (map[string]string, error) {
	props, err := ReadPropertiesFile(path)
	for k, v := range props {
		props[k] = strings.TrimSpace(v)
	}
	return props, err
}

// checkMetaProperties compares the data directory's meta.properties with
// the cluster and broker id, and writes the file if it is missing.
func checkMetaProperties(dir string, brokerID int32, clusterID string) error {
	path := filepath.Join(dir, metaPropertiesFile)
	props, err := readProperties(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data := fmt.Sprintf("#Written by strata broker; do not edit\nversion=0\nbroker.id=%d\ncluster.id=%s\n", brokerID, clusterID)
		if err := atomicfile.WriteFile(path, []byte(data), 0o600 /* owner only */); err != nil {
			return fmt.Errorf("broker: write %s: %w", path, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("broker: read %s: %w", path, err)
	}
	if v := props["cluster.id"]; v != "" && v != clusterID {
		return fmt.Errorf("broker: the data directory %s belongs to cluster %s, but the coordinator holds cluster %s; "+
			"point zookeeper.connect (and its chroot) at that cluster, or use another log.dirs", dir, v, clusterID)
	}
	if v, ok := props["broker.id"]; ok && v != strconv.Itoa(int(brokerID)) {
		return fmt.Errorf("broker: the data directory %s belongs to broker.id %s, not %d; set broker.id=%s or use another log.dirs", dir, v, brokerID, v)
	}
	return nil
}

// errBadPartitionMetadata: a partition.metadata that does not parse.
var errBadPartitionMetadata = errors.New("broker: damaged partition.metadata")

// readPartitionTopicID returns the topic ID recorded in a partition
// directory; ok is false when the directory has no partition.metadata.
func readPartitionTopicID(dir string) (id coord.TopicID, ok bool, err error) {
	props, err := readProperties(filepath.Join(dir, partitionMetadataFile))
	if errors.Is(err, fs.ErrNotExist) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	raw, err := base64.RawURLEncoding.DecodeString(props["topic_id"])
	if err != nil || len(raw) != len(id) {
		return id, false, fmt.Errorf("%w: %s: bad topic_id %q", errBadPartitionMetadata, filepath.Join(dir, partitionMetadataFile), props["topic_id"])
	}
	copy(id[:], raw)
	return id, true, nil
}

// writePartitionTopicID records the topic ID in a partition directory.
func writePartitionTopicID(dir string, id coord.TopicID) error {
	data := "version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(id[:]) + "\n"
	if err := atomicfile.WriteFile(filepath.Join(dir, partitionMetadataFile), []byte(data), 0o600 /* owner only */); err != nil {
		return fmt.Errorf("broker: write %s/%s: %w", dir, partitionMetadataFile, err)
	}
	return nil
}

// looksLikePartitionDir reports whether name is topic-N for a legal topic
// name.
func looksLikePartitionDir(name string) bool {
	_, _, ok := splitPartitionDir(name)
	return ok
}

// splitPartitionDir splits a partition directory's name (segment names
// it) into a legal topic name and the partition.
func splitPartitionDir(name string) (topic string, index int32, ok bool) {
	topic, index, ok = segment.ParsePartitionDirName(name)
	if !ok || validTopicName(topic) != nil {
		return "", 0, false
	}
	return topic, index, true
}

// removeStrayPartitions deletes the partition directories whose topic is
// gone from snap: its ID (partition.metadata) is not the ID of the topic
// of that name, or there is no such topic. A directory without
// partition.metadata (written before the file existed) is kept if its
// topic exists; otherwise it is removed only with removeUnknownLegacy (the
// embedded coordinator's file existed and names every topic, as the
// single-node broker always did).
func (s *Server) removeStrayPartitions(snap *coord.Snapshot, removeUnknownLegacy bool) error {
	dirs := s.dirs.partitionDirs()
	for _, entry := range slices.Sorted(maps.Keys(dirs)) {
		name, index, _ := splitPartitionDir(entry)
		dir := dirs[entry]
		id, hasID, err := readPartitionTopicID(dir)
		switch {
		case err == nil:
		case isStorageError(err):
			s.logDirFailed(s.dirs.dirOf(entry), err)
			continue
		default:
			// Which topic the log belongs to is unknown: neither
			// delete it nor serve it.
			s.log.Error("partition offline: a file of it is damaged", "dir", dir, "err", err)
			s.dirs.markPartitionOffline(entry, dir, err)
			continue
		}
		t, known := snap.Topic(name)
		var why string
		switch {
		case known && hasID && t.ID != id:
			why = "its topic was deleted and created again while this broker was down"
		case known && int(index) >= len(t.Partitions):
			why = "its topic has no such partition"
		case known && !slices.Contains(t.Partitions[index].Replicas, s.cfg.BrokerID):
			why = "this broker is no longer one of its replicas (reassigned)"
		case known:
			continue
		case hasID:
			why = "its topic was deleted"
		case removeUnknownLegacy:
			why = "no topic names it"
		default:
			s.log.Warn("keeping a partition directory of an unknown topic without partition.metadata", "dir", dir)
			continue
		}
		s.log.Warn("removing partition directory", "dir", dir, "reason", why)
		if err := os.RemoveAll(dir); err != nil {
			if isStorageError(err) {
				s.logDirFailed(s.dirs.dirOf(entry), err)
				continue
			}
			return fmt.Errorf("broker: remove stray partition directory: %w", err)
		}
		s.dirs.forget(entry)
	}
	return nil
}
