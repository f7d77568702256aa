package broker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/atomicfile"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file moves a hosted replica from one of the broker's log
// directories to another (AlterReplicaLogDirs, KIP-113), while it keeps
// serving. Kafka creates a "future" log in the destination that a
// ReplicaAlterLogDirsThread fills from the current one, then swaps the
// two; Strata copies the files (segment.Mover):
//
//  1. The future replica is the staging directory
//     <dest>/<topic>-<n>.<random>-future (Kafka's name). The sealed
//     segments are copied into it while produce, fetch, replication,
//     retention and tiering go on. DescribeLogDirs shows it (IsFutureKey)
//     with the bytes copied and its lag: the current log end minus the
//     offset the copy reaches.
//  2. Under the partition's append lock (produce and replication wait;
//     fetches go on), the producer state is snapshotted, the log flushed
//     and checkpointed, the rest copied (the active segment, the
//     checkpoints, the leader-epoch checkpoint, producer snapshots,
//     partition.metadata, the tiering epoch base: every file) and
//     fsynced. Then the commit: a marker file (moveMarkerFile) is written
//     into the staging directory, which is renamed to <dest>/<topic>-<n>
//     (the destination's directory fsynced). The log reopens its files
//     there; the partition's log directory is the destination from now
//     on. Nothing was written to the old copy since step 2 began.
//  3. The old directory is deleted, then the marker.
//
// After a crash (kill -9) at any point, the start (logDirs.scan) finds
// one of: a staging directory (step 1 or 2 not committed): it is
// deleted, the old replica is whole and used; the partition in both
// directories with the marker in the destination's copy (between 2 and
// 3): the old copy is deleted and the new one used; the marker alone:
// it is deleted. A partition in two directories without the marker is
// still refused (either may be stale). An interrupted move is not
// resumed (Kafka resumes it): send AlterReplicaLogDirs again.
//
// A move stops, its staging directory deleted, when the partition closes
// (its topic deleted, the replica reassigned away, a directory failing,
// shutdown), when another destination is asked for (the new move
// starts), or when the current directory is asked for (a no-op success
// then, as in Kafka). A disk failure while copying takes the directory
// whose file failed offline (logdirs.go).

// moveMarkerFile marks a moved copy as the current one (step 2 above).
const moveMarkerFile = ".strata-moved"

// futureSuffix ends the name of a staging directory.
const futureSuffix = "-future"

// futureReplica is a move in progress.
type futureReplica struct {
	dest  *logDir
	stage string // the staging directory
	mover atomic.Pointer[segment.Mover]
	stop  atomic.Bool
	done  chan struct{}
}

// futureReplica returns the partition's move in progress, or nil.
func (p *partition) futureReplica() *futureReplica { return p.future.Load() }

// isFutureDirName reports whether name is a staging directory's.
func isFutureDirName(name string) bool {
	base, ok := strings.CutSuffix(name, futureSuffix)
	if !ok {
		return false
	}
	i := strings.LastIndexByte(base, '.')
	return i > 0 && looksLikePartitionDir(base[:i])
}

// moveReplica starts moving p to dest, unless it is there already or
// moving there. A move to another destination in progress is stopped
// first. It returns at once; the move runs in the background.
func (s *Server) moveReplica(p *partition, dest *logDir) error {
	s.moveMu.Lock()
	defer s.moveMu.Unlock()
	if f := p.futureReplica(); f != nil {
		if f.dest == dest {
			return nil
		}
		f.stop.Store(true)
		<-f.done
	}
	if p.logDir() == dest {
		return nil // already there: Kafka's no-op
	}
	s.closeMu.Lock()
	closing := s.done
	if !closing {
		s.bgWG.Add(1)
	}
	s.closeMu.Unlock()
	if closing {
		return newKafkaError(kerr.ReplicaNotAvailable, "the broker is shutting down")
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := segmentDirName(p)
	f := &futureReplica{dest: dest, stage: filepath.Join(dest.path, name+"."+hex.EncodeToString(rnd[:])+futureSuffix), done: make(chan struct{})}
	p.future.Store(f)
	if s.cleaner != nil {
		s.cleaner.abort(p) // no cleaning while the files are copied
	}
	go func() {
		defer s.bgWG.Done()
		defer close(f.done)
		defer p.future.CompareAndSwap(f, nil)
		start := s.nowFn()
		err := s.runMove(p, f)
		elapsed := s.nowFn().Sub(start).Round(time.Millisecond).String()
		if err != nil {
			if rmErr := os.RemoveAll(f.stage); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
				s.log.Warn("replica move: removing the future replica failed", "dir", f.stage, "err", rmErr)
			}
			s.log.Warn("replica move to another log directory stopped", "topic", p.topic, "partition", p.index,
				"to", dest.path, "elapsed", elapsed, "err", err)
			return
		}
		s.log.Info("replica moved to another log directory", "topic", p.topic, "partition", p.index,
			"to", dest.path, "elapsed", elapsed)
	}()
	return nil
}

func segmentDirName(p *partition) string { return segment.PartitionDirName(p.topic, p.index) }

// errMoveStopped: a move was stopped (replaced, the broker closing).
var errMoveStopped = errors.New("broker: replica move stopped")

// runMove copies p into f.stage and switches it there (steps 1-3 at the
// top of the file).
func (s *Server) runMove(p *partition, f *futureReplica) error {
	src := p.logDir()
	name := segmentDirName(p)
	stopped := func() bool { return f.stop.Load() || s.shuttingDown() }
	if err := os.Mkdir(f.stage, 0o755); err != nil {
		return s.moveFailed(p, f, err)
	}
	m := p.log.NewMover(f.stage)
	f.mover.Store(m)
	s.moveHook("copying", f)
	if err := m.CopySealed(stopped); err != nil {
		if stopped() {
			return errMoveStopped
		}
		return s.moveFailed(p, f, err)
	}
	s.moveHook("copied", f)
	if stopped() {
		return errMoveStopped
	}
	final := filepath.Join(f.dest.path, name)
	oldDir := p.path()
	p.appendMu.Lock()
	err := m.Finish(func(dir string) error {
		// The producer state as of the log end goes with the log (the
		// .txnindex files are copied with the other plain files).
		end := p.log.LogEndOffset()
		if end == p.snapshotEnd {
			return nil
		}
		data, err := p.producers.EncodeSnapshot(end)
		if err == nil {
			err = producer.WriteSnapshot(dir, end, data)
		}
		if err == nil {
			p.snapshotEnd = end
		}
		return err
	}, func() (string, error) {
		if stopped() {
			return "", errMoveStopped
		}
		if err := atomicfile.WriteFile(filepath.Join(f.stage, moveMarkerFile), []byte(oldDir+"\n"), 0o644); err != nil {
			return "", err
		}
		if _, err := os.Lstat(final); err == nil {
			return "", fmt.Errorf("broker: %s exists already", final)
		}
		if err := os.Rename(f.stage, final); err != nil {
			return "", err
		}
		s.moveHook("renamed", f)
		// Committed: from here on the partition lives in dest.
		s.dirs.moved(name, f.dest)
		p.ldir.Store(f.dest)
		if err := atomicfile.SyncDir(f.dest.path); err != nil {
			s.logDirFailed(f.dest, fmt.Errorf("partition %s: %w", name, err))
		}
		return final, nil
	})
	p.appendMu.Unlock()
	if err != nil {
		if errors.Is(err, errMoveStopped) {
			return err
		}
		return s.moveFailed(p, f, err)
	}
	s.moveHook("switched", f)
	if err := os.RemoveAll(oldDir); err != nil {
		s.log.Warn("replica move: removing the old copy failed; the next start removes it", "dir", oldDir, "err", err)
		if isStorageError(err) {
			s.logDirFailed(src, err)
		}
		return nil
	}
	_ = atomicfile.SyncDir(src.path)
	if err := os.Remove(filepath.Join(final, moveMarkerFile)); err != nil {
		s.log.Warn("replica move: removing the move marker failed", "dir", final, "err", err)
	}
	return nil
}

// moveFailed reports a failed move; a storage error takes the directory
// whose file failed offline.
func (s *Server) moveFailed(p *partition, f *futureReplica, err error) error {
	if isStorageError(err) {
		d := p.logDir()
		var pe *fs.PathError
		if errors.As(err, &pe) && strings.HasPrefix(pe.Path, f.dest.path+string(filepath.Separator)) {
			d = f.dest
		}
		s.logDirFailed(d, fmt.Errorf("replica move of %s-%d: %w", p.topic, p.index, err))
	}
	return err
}

// moveHook calls the test hook, if any, at a point of a move.
func (s *Server) moveHook(point string, f *futureReplica) {
	if h := s.testMoveHook; h != nil {
		h(point, f.stage)
	}
}

// recoverMoves settles, at start, what an interrupted move left in the
// directory d (see the top of the file): it deletes staging directories
// and returns the partition directories holding the move marker.
func recoverMoves(d string, ents []os.DirEntry, log interface {
	Warn(string, ...any)
}) (moved map[string]bool, err error) {
	moved = map[string]bool{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		switch {
		case isFutureDirName(e.Name()):
			path := filepath.Join(d, e.Name())
			log.Warn("removing the future replica of an interrupted replica move; the current replica is used", "dir", path)
			if err := os.RemoveAll(path); err != nil {
				return nil, fmt.Errorf("broker: remove %s: %w", path, err)
			}
		case looksLikePartitionDir(e.Name()):
			if _, err := os.Lstat(filepath.Join(d, e.Name(), moveMarkerFile)); err == nil {
				moved[e.Name()] = true
			}
		}
	}
	return moved, nil
}
