package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stratastream/strata/segment/atomicfile"
)

// Checkpoint files of a partition directory. Each is replaced atomically
// (temp file, fsync, rename, fsync directory), so after a crash it holds
// either the old or the new contents.
//
// The offset checkpoints use the layout of Kafka's checkpoint files with a
// single entry, since the directory already names the partition:
//
//	0          version
//	1          entry count
//	<offset>
//
// The leader-epoch checkpoint is Kafka's leader-epoch-checkpoint:
//
//	0          version
//	<n>        entry count
//	<epoch> <start offset>   n lines
const (
	recoveryPointFile  = "recovery-point-offset-checkpoint"
	logStartOffsetFile = "log-start-offset-checkpoint"
	leaderEpochFile    = "leader-epoch-checkpoint"
	highWatermarkFile  = "replication-offset-checkpoint"
	// cleanerOffsetFile holds the cleaner checkpoint: the first offset not
	// yet cleaned. Kafka keeps one cleaner-offset-checkpoint per log
	// directory listing every partition; here each partition directory has
	// its own, with a single entry, like the other offset checkpoints.
	cleanerOffsetFile = "cleaner-offset-checkpoint"
	cleanShutdownFile = ".clean-shutdown"

	tmpSuffix         = atomicfile.TempSuffix
	checkpointVersion = 0
)

// ErrBadCheckpoint is returned when a checkpoint file cannot be parsed.
var ErrBadCheckpoint = errors.New("segment: malformed checkpoint")

// writeFileAtomic replaces dir/name with data (see package atomicfile).
func writeFileAtomic(dir, name string, data []byte) error {
	if err := atomicfile.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		return fmt.Errorf("segment: checkpoint %s: %w", name, err)
	}
	return nil
}

// syncDir fsyncs a directory so that entries created, renamed or removed in
// it are durable.
func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	return nil
}

// writeOffsetCheckpoint atomically writes a single-offset checkpoint.
func writeOffsetCheckpoint(dir, name string, off int64) error {
	return writeFileAtomic(dir, name, offsetCheckpointData(off))
}

// offsetCheckpointData is the contents of a single-offset checkpoint.
func offsetCheckpointData(off int64) []byte {
	return fmt.Appendf(nil, "%d\n1\n%d\n", checkpointVersion, off)
}

// ReadLogStartOffset reads the log-start-offset checkpoint of the
// partition directory dir: the first offset of the log that may be read
// (retention and DeleteRecords move it, possibly inside a segment). ok is
// false when there is none. It only reads, so it may run beside the broker
// that owns dir; a checkpoint is replaced atomically, so it is never seen
// half written. ErrBadCheckpoint when the file does not parse.
func ReadLogStartOffset(dir string) (off int64, ok bool, err error) {
	return readOffsetCheckpoint(dir, logStartOffsetFile)
}

// ReadRecoveryPoint reads the recovery-point checkpoint of dir: the offset
// up to which the log was fsynced when it was last written. Otherwise as
// ReadLogStartOffset.
func ReadRecoveryPoint(dir string) (off int64, ok bool, err error) {
	return readOffsetCheckpoint(dir, recoveryPointFile)
}

// ReadHighWatermark reads the high-watermark checkpoint of dir. Otherwise
// as ReadLogStartOffset.
func ReadHighWatermark(dir string) (off int64, ok bool, err error) {
	return readOffsetCheckpoint(dir, highWatermarkFile)
}

// ReadCleanerCheckpoint reads the cleaner checkpoint of dir: the first
// offset the log cleaner has not cleaned yet (Log.CleanerCheckpoint).
// Otherwise as ReadLogStartOffset.
func ReadCleanerCheckpoint(dir string) (off int64, ok bool, err error) {
	return readOffsetCheckpoint(dir, cleanerOffsetFile)
}

// readOffsetCheckpoint reads a single-offset checkpoint. ok is false when the
// file does not exist.
func readOffsetCheckpoint(dir, name string) (off int64, ok bool, err error) {
	lines, ok, err := readCheckpointLines(dir, name)
	if err != nil || !ok {
		return 0, ok, err
	}
	if len(lines) != 1 {
		return 0, false, fmt.Errorf("%w: %s: %d entries, want 1", ErrBadCheckpoint, name, len(lines))
	}
	off, err = strconv.ParseInt(lines[0], 10, 64)
	if err != nil || off < 0 {
		return 0, false, fmt.Errorf("%w: %s: offset %q", ErrBadCheckpoint, name, lines[0])
	}
	return off, true, nil
}

// readCheckpointLines reads a checkpoint file and returns its entry lines
// after checking the version and the count.
func readCheckpointLines(dir, name string) (entries []string, ok bool, err error) {
	_, entries, ok, err = readVersionedLines(dir, name, checkpointVersion)
	return entries, ok, err
}

// readVersionedLines is readCheckpointLines for a file of the checkpoint
// layout whose version may be any of versions; it returns which.
func readVersionedLines(dir, name string, versions ...int) (version int, entries []string, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("segment: checkpoint %s: %w", name, err)
	}
	version, entries, err = parseVersionedLines(name, data, versions...)
	return version, entries, err == nil, err
}

// parseVersionedLines parses the contents of a file of the checkpoint
// layout (see readVersionedLines); name is for the errors.
func parseVersionedLines(name string, data []byte, versions ...int) (version int, entries []string, err error) {
	lines := strings.Split(string(bytes.TrimRight(data, "\n")), "\n")
	if len(lines) < 2 {
		return 0, nil, fmt.Errorf("%w: %s: %d lines", ErrBadCheckpoint, name, len(lines))
	}
	v := strings.TrimSpace(lines[0])
	vi := slices.IndexFunc(versions, func(want int) bool { return v == strconv.Itoa(want) })
	if vi < 0 {
		return 0, nil, fmt.Errorf("%w: %s: version %q", ErrBadCheckpoint, name, v)
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n < 0 || n != len(lines)-2 {
		return 0, nil, fmt.Errorf("%w: %s: count %q for %d entries", ErrBadCheckpoint, name, lines[1], len(lines)-2)
	}
	entries = lines[2:]
	for i := range entries {
		entries[i] = strings.TrimSpace(entries[i])
	}
	return versions[vi], entries, nil
}
