package broker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// partitionsIn lists the partition directories of topic in dir.
func partitionsIn(t *testing.T, dir, topic string) []int32 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for _, e := range ents {
		if tp, i, ok := segment.ParsePartitionDirName(e.Name()); ok && tp == topic && e.IsDir() {
			out = append(out, i)
		}
	}
	return out
}

// TestLogDirsPlacement: with two directories, new partitions go to the
// one with fewer partitions; each directory gets its own meta.properties
// and lock; a restart finds every partition where it is.
func TestLogDirsPlacement(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	s, cl := startOn(t, d1+","+d2, nil)
	createTopic(t, cl, "jbod", 6, nil)
	for i := range int32(6) {
		if r := produceRaw(t, cl, "jbod", i, buildBatch(t, segment.CodecNone, 2)); r.ErrorCode != 0 {
			t.Fatalf("produce to %d: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	n1, n2 := len(partitionsIn(t, d1, "jbod")), len(partitionsIn(t, d2, "jbod"))
	if n1+n2 != 6 || n1 < 2 || n2 < 2 {
		t.Errorf("jbod's partitions: %d in the first directory, %d in the second; want them spread", n1, n2)
	}
	for _, d := range []string{d1, d2} {
		if _, err := os.Stat(filepath.Join(d, metaPropertiesFile)); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	// Each directory is locked: a second broker on d2 alone is refused.
	cfg := testConfig(t, map[string]string{"log.dirs": d2})
	if s2, err := NewServer(cfg); err == nil {
		_ = s2.Shutdown(context.Background())
		t.Fatal("a second broker started on a directory in use")
	} else if !strings.Contains(err.Error(), d2) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second broker: %v, want the directory named as in use", err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	s, cl = startOn(t, d1+","+d2, nil)
	for i := range int32(6) {
		fr := fetchRaw(t, cl, "jbod", i, 0, 1<<20)
		if fr.ErrorCode != 0 || fr.HighWatermark != 2 {
			t.Errorf("after restart, partition %d: error %v, high watermark %d, want 2", i, kerr.ErrorForCode(fr.ErrorCode), fr.HighWatermark)
		}
	}
	if got, want := len(partitionsIn(t, d1, "jbod")), n1; got != want {
		t.Errorf("after restart: %d partitions in the first directory, want %d (none moved or created again)", got, want)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A partition in both directories is refused, naming both copies.
	p := partitionsIn(t, d1, "jbod")[0]
	name := segment.PartitionDirName("jbod", p)
	if err := os.Mkdir(filepath.Join(d2, name), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg = testConfig(t, map[string]string{"log.dirs": d1 + "," + d2})
	if s2, err := NewServer(cfg); err == nil {
		_ = s2.Shutdown(context.Background())
		t.Fatal("started with a partition in two directories")
	} else if !strings.Contains(err.Error(), filepath.Join(d1, name)) || !strings.Contains(err.Error(), filepath.Join(d2, name)) {
		t.Errorf("duplicate partition: %v, want both paths named", err)
	}
}

// faultyFile fails writes and fsyncs with EIO while fail is set.
type faultyFile struct {
	*os.File
	fail *atomic.Bool
}

func (f faultyFile) WriteAt(b []byte, off int64) (int, error) {
	if f.fail.Load() {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.WriteAt(b, off)
}

func (f faultyFile) Sync() error {
	if f.fail.Load() {
		return &os.PathError{Op: "fsync", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Sync()
}

// failingDirs makes the segment files under each directory of dirs fail
// while its switch is set.
func failingDirs(dirs map[string]*atomic.Bool) segment.Option {
	return segment.WithFileWrapper(func(path string, f *os.File) segment.File {
		for d, fail := range dirs {
			if strings.HasPrefix(path, d+string(filepath.Separator)) {
				return faultyFile{f, fail}
			}
		}
		return f
	})
}

// TestLogDirFailure: a directory whose disk fails (EIO on write) goes
// offline: its partitions answer KAFKA_STORAGE_ERROR, the controller
// takes them offline (a single node: no leader), the metrics say which
// directory failed, and the other directory keeps serving. When the last
// directory fails the broker stops (Fatal).
func TestLogDirFailure(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	var fail1, fail2 atomic.Bool
	cfg := testConfig(t, map[string]string{"log.dirs": d1 + "," + d2, "metrics.listener": "127.0.0.1:0"})
	cfg.LogOptions = []segment.Option{failingDirs(map[string]*atomic.Bool{d1: &fail1, d2: &fail2})}
	s := startServerConfig(t, cfg)
	cl := newClient(t, s)
	createTopic(t, cl, "disk", 4, nil)
	bad, good := partitionsIn(t, d2, "disk"), partitionsIn(t, d1, "disk")
	if len(bad) == 0 || len(good) == 0 {
		t.Fatalf("partitions not spread: %v in %s, %v in %s", good, d1, bad, d2)
	}
	for i := range int32(4) {
		if r := produceRaw(t, cl, "disk", i, buildBatch(t, segment.CodecNone, 3)); r.ErrorCode != 0 {
			t.Fatalf("produce to %d: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
	}

	fail2.Store(true)
	r := produceRaw(t, cl, "disk", bad[0], buildBatch(t, segment.CodecNone, 1))
	if r.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("produce on the failing disk: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(r.ErrorCode))
	}
	waitFor(t, "the directory reported offline", func() bool {
		return s.dirs.offlineCount() >= len(bad) && len(s.dirs.online()) == 1
	})
	waitFor(t, "the controller took the failed replicas offline", func() bool {
		for _, i := range bad {
			if p, ok := s.coord.Snapshot().Partition(coord.TopicPartition{Topic: "disk", Partition: i}); !ok || p.State.Leader != coord.NoLeader {
				return false
			}
		}
		return true
	})
	for _, i := range bad {
		if r := produceRaw(t, cl, "disk", i, buildBatch(t, segment.CodecNone, 1)); r.ErrorCode != kerr.KafkaStorageError.Code {
			t.Errorf("produce to offline partition %d: %v, want KAFKA_STORAGE_ERROR", i, kerr.ErrorForCode(r.ErrorCode))
		}
		if fr := fetchRaw(t, cl, "disk", i, 0, 1<<20); fr.ErrorCode != kerr.KafkaStorageError.Code {
			t.Errorf("fetch from offline partition %d: %v, want KAFKA_STORAGE_ERROR", i, kerr.ErrorForCode(fr.ErrorCode))
		}
	}
	for _, i := range good {
		if r := produceRaw(t, cl, "disk", i, buildBatch(t, segment.CodecNone, 1)); r.ErrorCode != 0 {
			t.Errorf("produce to healthy partition %d: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
		if fr := fetchRaw(t, cl, "disk", i, 0, 1<<20); fr.ErrorCode != 0 || fr.HighWatermark != 4 {
			t.Errorf("fetch from healthy partition %d: %v, high watermark %d, want 4", i, kerr.ErrorForCode(fr.ErrorCode), fr.HighWatermark)
		}
	}
	offlineWant := 0 // every partition directory in d2, __consumer_offsets too
	ents, _ := os.ReadDir(d2)
	for _, e := range ents {
		if e.IsDir() && looksLikePartitionDir(e.Name()) {
			offlineWant++
		}
	}
	fams := scrape(t, s)
	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"strata_broker_log_dir_offline", []string{"dir", d2}, 1},
		{"strata_broker_log_dir_offline", []string{"dir", d1}, 0},
		{"strata_broker_offline_log_dirs", nil, 1},
		{"strata_broker_offline_replicas", nil, float64(offlineWant)},
	} {
		if got := mustValue(t, fams, m.name, m.labels...); got != m.want {
			t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}

	// The last directory fails: the broker cannot serve anything and
	// says it must stop.
	fail1.Store(true)
	produceRaw(t, cl, "disk", good[0], buildBatch(t, segment.CodecNone, 1))
	select {
	case err := <-s.Fatal():
		if !strings.Contains(err.Error(), "every log directory is offline") || !strings.Contains(err.Error(), d1) {
			t.Errorf("Fatal: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no Fatal with every log directory offline")
	}
}

// TestDamagedPartitionFiles: files of a stopped broker's partitions are
// damaged. Checkpoints that do not parse are rebuilt from the log and the
// partition serves everything it had; a partition.metadata that does not
// parse (which topic the log belongs to is unknown) takes that partition
// offline, with the file named, while the broker and the other
// partitions go on.
func TestDamagedPartitionFiles(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	dirs := d1 + "," + d2
	s, cl := startOn(t, dirs, nil)
	createTopic(t, cl, "dmg", 4, nil)
	for i := range int32(4) {
		if r := produceRaw(t, cl, "dmg", i, buildBatch(t, segment.CodecNone, 5)); r.ErrorCode != 0 {
			t.Fatalf("produce to %d: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	pathOf := func(p int32) string {
		name := segment.PartitionDirName("dmg", p)
		for _, d := range []string{d1, d2} {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				return filepath.Join(d, name)
			}
		}
		t.Fatalf("%s in neither directory", name)
		return ""
	}
	garbage := []byte("\x00not a checkpoint\n")
	for _, f := range []struct {
		p    int32
		file string
	}{
		{0, partitionMetadataFile},
		{1, "leader-epoch-checkpoint"},
		{1, "replication-offset-checkpoint"},
		{2, "recovery-point-offset-checkpoint"},
		{2, "log-start-offset-checkpoint"},
		{3, "leader-epoch-checkpoint"},
	} {
		if err := os.WriteFile(filepath.Join(pathOf(f.p), f.file), garbage, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	logs := &logLines{t: t}
	cfg := testConfig(t, map[string]string{"log.dirs": dirs, "offsets.topic.num.partitions": "2"})
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s = startServerConfig(t, cfg)
	cl = newClient(t, s)
	if fr := fetchRaw(t, cl, "dmg", 0, 0, 1<<20); fr.ErrorCode != kerr.KafkaStorageError.Code {
		t.Errorf("partition with a damaged partition.metadata: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(fr.ErrorCode))
	}
	bad := filepath.Join(pathOf(0), partitionMetadataFile)
	if len(logs.containing(bad)) == 0 {
		t.Errorf("no log line names %s", bad)
	}
	for i := int32(1); i < 4; i++ {
		fr := fetchRaw(t, cl, "dmg", i, 0, 1<<20)
		if fr.ErrorCode != 0 || fr.HighWatermark != 5 || len(fr.RecordBatches) == 0 {
			t.Errorf("partition %d with rebuilt checkpoints: %v, high watermark %d, %d bytes; want all 5 records",
				i, kerr.ErrorForCode(fr.ErrorCode), fr.HighWatermark, len(fr.RecordBatches))
		}
		if r := produceRaw(t, cl, "dmg", i, buildBatch(t, segment.CodecNone, 1)); r.ErrorCode != 0 || r.BaseOffset != 5 {
			t.Errorf("produce to %d after the rebuild: %v at %d, want offset 5", i, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
	}
	if len(logs.containing("rebuilding a checkpoint")) < 5 {
		t.Errorf("rebuilt checkpoints not logged:\n%s", strings.Join(logs.containing("checkpoint"), "\n"))
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
