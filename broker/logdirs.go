package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/stratastream/strata/segment"
)

// This file holds the broker's data directories (log.dirs, Kafka's JBOD,
// KIP-112 and KIP-113):
//
//   - Each directory has its own lock and meta.properties (datadir.go)
//     and holds whole partition directories (topic-N). At start every
//     directory is scanned; a partition found in two of them is a
//     startup error naming both, since either copy may be the stale one.
//   - A partition this broker has never held goes to the online
//     directory holding the fewest partitions (ties: the first listed),
//     as Kafka's LogManager.nextLogDirs places it.
//   - A directory whose disk fails (a write, fsync or checkpoint write
//     poisons a log in it; a read of its files fails with EIO; ENOSPC,
//     EROFS and the like count as failures too, as an IOException does
//     in Kafka) goes offline for the rest of the process's life: its
//     partitions are closed and no longer led or followed here, clients
//     get KAFKA_STORAGE_ERROR for them, and the controller is told
//     (coord.ReportOfflineReplicas) so that their leadership moves to
//     other in-sync replicas and the ISR drops this broker. The other
//     directories keep serving. With every directory offline the broker
//     stops (Fatal), as Kafka halts.
//   - A partition whose files are damaged beyond what recovery rebuilds
//     (a partition.metadata that does not parse, say) is offline on its
//     own, with the file named, and reported the same way.
//   - After a restart a directory is used again if it opens; a replica
//     that is not in any online directory while some directory is
//     offline is offline too (it may be on the failed disk: creating it
//     empty would hide that), unless the partition was created after
//     this broker started.
//
// The first directory (MetaDir) also holds the embedded coordinator's
// file and the producer-id blocks; it must open at start.

// logDir is one directory of log.dirs.
type logDir struct {
	path string
	lock *os.File // nil when it was offline at start

	offline atomic.Bool
	// closed is set once the broker has closed the directory's
	// partitions (Server.takeLogDirOffline); guarded by logDirs.mu.
	closed bool
}

// offlineReplica is a hosted partition this broker cannot serve.
type offlineReplica struct {
	dir    string // the log directory (or partition directory) at fault
	reason error
	// reported is set once the controller has acknowledged it.
	reported bool
}

// logDirs are the broker's data directories and where each hosted
// partition lives.
type logDirs struct {
	dirs []*logDir
	log  *slog.Logger
	// wake is signalled (capacity 1, never blocks) when a directory or a
	// partition goes offline, or reports must be made again.
	wake chan struct{}

	mu struct {
		sync.Mutex
		where   map[string]*logDir        // partition directory name → its log directory
		offline map[string]offlineReplica // partition directory name → why it is not served
		causes  map[*logDir]error         // why each offline directory failed
		// preferred is where AlterReplicaLogDirs asked a partition
		// this broker does not host yet to be created (Kafka's
		// preferred log dir): used once, when it is.
		preferred map[string]*logDir
	}
}

// errLogDirOffline is wrapped by the errors about offline replicas.
var errLogDirOffline = errors.New("broker: log directory offline")

// openLogDirs creates and locks each directory. A directory another
// broker holds refuses the start; one that cannot be created or locked
// for an I/O reason is offline from the start, unless it is the first
// (MetaDir), or none is left.
func openLogDirs(paths []string, log *slog.Logger) (*logDirs, error) {
	ds := &logDirs{log: log, wake: make(chan struct{}, 1)}
	ds.mu.where = map[string]*logDir{}
	ds.mu.offline = map[string]offlineReplica{}
	ds.mu.causes = map[*logDir]error{}
	ds.mu.preferred = map[string]*logDir{}
	for i, p := range paths {
		d := &logDir{path: p}
		ds.dirs = append(ds.dirs, d)
		err := os.MkdirAll(p, 0o755)
		if err == nil {
			d.lock, err = lockDir(p)
		}
		switch {
		case err == nil:
		case i > 0 && isStorageError(err):
			log.Error("log directory offline at start", "dir", p, "err", err)
			ds.markDirOffline(d, err)
		default:
			ds.close()
			return nil, fmt.Errorf("broker: data directory %s: %w", p, err)
		}
	}
	return ds, nil
}

// close releases the locks.
func (ds *logDirs) close() error {
	var errs []error
	for _, d := range ds.dirs {
		if d.lock != nil {
			errs = append(errs, d.lock.Close())
			d.lock = nil
		}
	}
	return errors.Join(errs...)
}

// online lists the directories that are not offline, in log.dirs order.
func (ds *logDirs) online() []*logDir {
	var out []*logDir
	for _, d := range ds.dirs {
		if !d.offline.Load() {
			out = append(out, d)
		}
	}
	return out
}

// scan finds the partition directories in every online directory. A
// directory that cannot be read goes offline; a partition in two
// directories is an error naming both, unless an interrupted replica
// move explains it (logdir_move.go: the copy with the move marker is
// current, the other is deleted). Staging directories of interrupted
// moves are deleted.
func (ds *logDirs) scan() error {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	found := map[string][]*logDir{} // partition directory → the directories holding it, in log.dirs order
	markers := map[string]*logDir{} // partition directory → the directory whose copy has the move marker
	for _, d := range ds.dirs {
		if d.offline.Load() {
			continue
		}
		ents, err := os.ReadDir(d.path)
		var moved map[string]bool
		if err == nil {
			moved, err = recoverMoves(d.path, ents, ds.log)
		}
		if err != nil {
			if !isStorageError(err) {
				return fmt.Errorf("broker: read data directory: %w", err)
			}
			ds.log.Error("log directory offline at start: it cannot be read", "dir", d.path, "err", err)
			ds.markDirOfflineLocked(d, err)
			continue
		}
		for name := range moved {
			markers[name] = d
		}
		for _, e := range ents {
			if e.IsDir() && looksLikePartitionDir(e.Name()) {
				found[e.Name()] = append(found[e.Name()], d)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(found)) {
		in := found[name]
		if len(in) == 1 {
			ds.mu.where[name] = in[0]
			continue
		}
		cur, ok := markers[name]
		if !ok || len(in) > 2 {
			return fmt.Errorf("broker: partition %s is in two log directories: %s and %s; "+
				"move the copy that is not current out of log.dirs before starting",
				name, filepath.Join(in[0].path, name), filepath.Join(in[1].path, name))
		}
		for _, d := range in {
			if d == cur {
				continue
			}
			old := filepath.Join(d.path, name)
			ds.log.Warn("removing the old copy of a replica moved to another log directory (the move was interrupted after it switched)",
				"dir", old, "current", filepath.Join(cur.path, name))
			if err := os.RemoveAll(old); err != nil {
				return fmt.Errorf("broker: remove %s: %w", old, err)
			}
		}
		ds.mu.where[name] = cur
	}
	for name, d := range markers {
		if err := os.Remove(filepath.Join(d.path, name, moveMarkerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("broker: remove the move marker of %s: %w", filepath.Join(d.path, name), err)
		}
	}
	return nil
}

// moved records that partition directory name lives in d now (a replica
// move switched it).
func (ds *logDirs) moved(name string, d *logDir) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.mu.where[name] = d
}

// partitionDirs lists the partition directories found or placed, by
// name, with their paths, in an online directory.
func (ds *logDirs) partitionDirs() map[string]string {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := make(map[string]string, len(ds.mu.where))
	for name, d := range ds.mu.where {
		if !d.offline.Load() {
			out[name] = filepath.Join(d.path, name)
		}
	}
	return out
}

// locate returns the log directory and path of partition directory
// name: where it is, or for a partition new to this broker the online
// directory with the fewest partitions. isNew says the partition was
// created after this broker started: only then may it be created while
// some directory is offline. An offline replica gives an error wrapping
// errLogDirOffline.
func (ds *logDirs) locate(name string, isNew bool) (*logDir, string, error) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if o, ok := ds.mu.offline[name]; ok {
		return nil, "", fmt.Errorf("%w: %s: %v", errLogDirOffline, name, o.reason)
	}
	if d, ok := ds.mu.where[name]; ok {
		return d, filepath.Join(d.path, name), nil
	}
	online := ds.online()
	if len(online) < len(ds.dirs) && !isNew {
		var offline []string
		for _, d := range ds.dirs {
			if d.offline.Load() {
				offline = append(offline, d.path)
			}
		}
		err := fmt.Errorf("%w: %s is in no online log directory, and %s may hold it", errLogDirOffline, name, strings.Join(offline, ", "))
		ds.mu.offline[name] = offlineReplica{dir: strings.Join(offline, ","), reason: err}
		ds.signal()
		return nil, "", err
	}
	if len(online) == 0 {
		return nil, "", fmt.Errorf("%w: every log directory is offline", errLogDirOffline)
	}
	if d, ok := ds.mu.preferred[name]; ok {
		delete(ds.mu.preferred, name)
		if !d.offline.Load() {
			ds.mu.where[name] = d
			return d, filepath.Join(d.path, name), nil
		}
	}
	count := map[*logDir]int{}
	for _, d := range ds.mu.where {
		count[d]++
	}
	best := online[0]
	for _, d := range online[1:] {
		if count[d] < count[best] {
			best = d
		}
	}
	ds.mu.where[name] = best
	return best, filepath.Join(best.path, name), nil
}

// dirOf returns the log directory holding partition directory name
// (the first directory if it is not known: the caller has a failure to
// report and a directory must take it).
func (ds *logDirs) dirOf(name string) *logDir {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d, ok := ds.mu.where[name]; ok {
		return d
	}
	return ds.dirs[0]
}

// forget drops a partition whose topic is gone.
func (ds *logDirs) forget(name string) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	delete(ds.mu.where, name)
	delete(ds.mu.offline, name)
	delete(ds.mu.preferred, name)
}

// prefer records d as where partition directory name is to be created
// if this broker comes to host it (AlterReplicaLogDirs for a replica not
// here yet). At most maxPreferred are kept: the oldest are not dropped,
// new ones are refused.
func (ds *logDirs) prefer(name string, d *logDir) bool {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if _, ok := ds.mu.preferred[name]; !ok && len(ds.mu.preferred) >= maxPreferred {
		return false
	}
	ds.mu.preferred[name] = d
	return true
}

// maxPreferred bounds the preferred directories remembered.
const maxPreferred = 100000

// offlineReason reports whether partition directory name is offline.
func (ds *logDirs) offlineReason(name string) (offlineReplica, bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	o, ok := ds.mu.offline[name]
	return o, ok
}

// markPartitionOffline takes one partition offline, with why (naming the
// damaged file).
func (ds *logDirs) markPartitionOffline(name, dir string, reason error) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if _, ok := ds.mu.offline[name]; !ok {
		ds.mu.offline[name] = offlineReplica{dir: dir, reason: reason}
		ds.signal()
	}
}

// fail takes d offline because of cause. first is true for the first
// failure of d; later ones change nothing.
func (ds *logDirs) fail(d *logDir, cause error) (first bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d.offline.Load() {
		return false
	}
	ds.markDirOfflineLocked(d, cause)
	return true
}

func (ds *logDirs) markDirOffline(d *logDir, cause error) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.markDirOfflineLocked(d, cause)
}

// markDirOfflineLocked marks d and every partition in it offline.
func (ds *logDirs) markDirOfflineLocked(d *logDir, cause error) {
	d.offline.Store(true)
	ds.mu.causes[d] = cause
	for name, in := range ds.mu.where {
		if in == d {
			if _, ok := ds.mu.offline[name]; !ok {
				ds.mu.offline[name] = offlineReplica{dir: d.path, reason: fmt.Errorf("log directory %s failed: %w", d.path, cause)}
			}
		}
	}
	ds.signal()
}

// toClose returns the directories that went offline and whose partitions
// the broker has not closed yet, and notes that it will.
func (ds *logDirs) toClose() []*logDir {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	var out []*logDir
	for _, d := range ds.dirs {
		if d.offline.Load() && !d.closed {
			d.closed = true
			out = append(out, d)
		}
	}
	return out
}

// unreported lists the offline partitions the controller has not
// acknowledged, by partition directory name, sorted.
func (ds *logDirs) unreported() []string {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	var out []string
	for name, o := range ds.mu.offline {
		if !o.reported {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// setReported marks names acknowledged by the controller (or, with
// false, to be reported again after a new session).
func (ds *logDirs) setReported(names []string, reported bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for _, n := range names {
		if o, ok := ds.mu.offline[n]; ok {
			o.reported = reported
			ds.mu.offline[n] = o
		}
	}
}

// reportAgain makes every offline partition be reported again (the
// coordination session that held the reports expired).
func (ds *logDirs) reportAgain() {
	ds.mu.Lock()
	for n, o := range ds.mu.offline {
		o.reported = false
		ds.mu.offline[n] = o
	}
	ds.mu.Unlock()
	ds.signal()
}

// signal wakes the broker's log directory loop.
func (ds *logDirs) signal() {
	select {
	case ds.wake <- struct{}{}:
	default:
	}
}

// logDirState is one directory as metrics and logs show it.
type logDirState struct {
	path       string
	offline    bool
	cause      error
	partitions int
}

// states describes every directory, in log.dirs order.
func (ds *logDirs) states() []logDirState {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	count := map[*logDir]int{}
	for _, d := range ds.mu.where {
		count[d]++
	}
	out := make([]logDirState, len(ds.dirs))
	for i, d := range ds.dirs {
		out[i] = logDirState{path: d.path, offline: d.offline.Load(), cause: ds.mu.causes[d], partitions: count[d]}
	}
	return out
}

// offlineCount is the number of offline partitions.
func (ds *logDirs) offlineCount() int {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return len(ds.mu.offline)
}

// storageErrnos are the errors that mean a directory's disk cannot be
// trusted, as an IOException is in Kafka: I/O errors, a full disk or
// quota, a file system gone read-only or damaged, a device gone.
var storageErrnos = []syscall.Errno{syscall.EIO, syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS,
	syscall.ENXIO, syscall.ENODEV, syscall.EUCLEAN}

// isStorageError reports whether err means the disk under a log
// directory failed: a poisoned log (its write or fsync failed), or one
// of storageErrnos.
func isStorageError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, segment.ErrPoisoned) {
		return true
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		for _, e := range storageErrnos {
			if errno == e {
				return true
			}
		}
	}
	return false
}

// isDamagedFile reports whether err says a file of a partition does not
// parse: the partition goes offline on its own (the disk may be fine).
func isDamagedFile(err error) bool {
	return errors.Is(err, segment.ErrBadCheckpoint) || segment.IsCorrupt(err) || errors.Is(err, errBadPartitionMetadata)
}
