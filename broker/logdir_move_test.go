package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
)

// alterLogDir sends AlterReplicaLogDirs moving topic's partitions to dir
// and returns the error code of each.
func alterLogDir(t *testing.T, cl *kgo.Client, dir, topic string, parts ...int32) map[int32]int16 {
	t.Helper()
	return alterLogDirOn(t, cl, 0, dir, topic, parts...)
}

// alterLogDirOn is alterLogDir sent to broker id.
func alterLogDirOn(t *testing.T, cl *kgo.Client, id int32, dir, topic string, parts ...int32) map[int32]int16 {
	t.Helper()
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	rd := kmsg.NewAlterReplicaLogDirsRequestDir()
	rd.Dir = dir
	rt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
	rt.Topic, rt.Partitions = topic, parts
	rd.Topics = append(rd.Topics, rt)
	req.Dirs = append(req.Dirs, rd)
	kr, err := cl.Broker(int(id)).Request(testCtx(t), req)
	if err != nil {
		t.Fatalf("AlterReplicaLogDirs: %v", err)
	}
	resp := kr.(*kmsg.AlterReplicaLogDirsResponse)
	out := map[int32]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic == topic {
				out[rp.Partition] = rp.ErrorCode
			}
		}
	}
	return out
}

// replicaIn describes topic-index on s: the directory of its current
// replica and whether a future replica exists ("" if not described).
func replicaIn(t *testing.T, s *Server, cl *kgo.Client, topic string, index int32) (cur string, future *kadm.DescribedLogDirPartition) {
	t.Helper()
	var ts kadm.TopicsSet
	ts.Add(topic, index)
	dirs, err := kadm.NewClient(cl).DescribeBrokerLogDirs(testCtx(t), s.cfg.BrokerID, ts)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if p, ok := d.Topics.Lookup(topic, index); ok {
			if p.IsFuture {
				future = &p
			} else {
				cur = d.Dir
			}
		}
	}
	return cur, future
}

// TestAlterReplicaLogDirsUnderLoad: an idempotent producer (acks=all)
// writes to a partition and a consumer reads it while the partition's
// replica moves between the broker's two log directories, back and
// forth. DescribeLogDirs shows the future replica (IsFutureKey, its lag)
// while it copies; every move ends with the partition's files only in
// the destination; every record acknowledged is read back once, in
// order, and still there after a restart.
func TestAlterReplicaLogDirsUnderLoad(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	props := map[string]string{"log.dirs": d1 + "," + d2}
	s := startServer(t, props)
	admin := newClient(t, s)
	createTopic(t, admin, "mv", 1, map[string]string{"segment.bytes": "16384"})
	start, _ := replicaIn(t, s, admin, "mv", 0)
	if start == "" {
		t.Fatal("mv-0 not described")
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic("mv"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(1000), kgo.RecordDeliveryTimeout(60*time.Second), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var stop atomic.Bool
	var acked, failed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	// produced is closed once the producer stopped and every record's
	// promise ran.
	produced := make(chan struct{})
	go func() { // values 0, 1, 2, ... in order
		defer wg.Done()
		defer close(produced)
		pace := time.NewTicker(10 * time.Millisecond)
		defer pace.Stop()
		for i := 0; i < 2_000_000 && !stop.Load(); i++ {
			r := &kgo.Record{Partition: 0, Value: []byte(fmt.Sprintf("%09d-%0100d", i, i))}
			prod.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					return
				}
				acked.Add(1)
			})
			if i%50 == 49 { // at most about 5000 records a second
				if err := prod.Flush(context.Background()); err != nil {
					t.Errorf("flush: %v", err)
					return
				}
				<-pace.C
			}
		}
		_ = prod.Flush(context.Background())
	}()
	consumer := newClient(t, s, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"mv": {0: kgo.NewOffset().AtStart()}}))
	var readMu sync.Mutex
	var read []string
	readErr := make(chan error, 1)
	consumeCtx, cancelConsume := context.WithCancel(context.Background())
	defer cancelConsume()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for consumeCtx.Err() == nil {
			fs := consumer.PollFetches(consumeCtx)
			fs.EachError(func(_ string, _ int32, err error) {
				if consumeCtx.Err() == nil {
					select {
					case readErr <- err:
					default:
					}
				}
			})
			readMu.Lock()
			fs.EachRecord(func(r *kgo.Record) { read = append(read, string(r.Value)) })
			readMu.Unlock()
		}
	}()
	waitFor(t, "records acknowledged", func() bool { return acked.Load() > 2000 })

	// The first move: held after the copy of the sealed segments, so the
	// future replica is seen.
	other := map[string]string{d1: d2, d2: d1}
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release) // before the server's Shutdown, which waits for the move
	var holdOnce sync.Once
	s.testMoveHook = func(point, stage string) {
		if point == "copied" {
			holdOnce.Do(func() { <-hold })
		}
	}
	cur := start
	const moves = 4
	for i := range moves {
		dest := other[cur]
		before := acked.Load()
		if code := alterLogDir(t, admin, dest, "mv", 0)[0]; code != 0 {
			t.Fatalf("move %d to %s: %v", i, dest, kerr.ErrorForCode(code))
		}
		if i == 0 {
			waitFor(t, "the future replica described", func() bool {
				c, f := replicaIn(t, s, admin, "mv", 0)
				return c == cur && f != nil && f.Dir == dest && f.Size > 0
			})
			_, f := replicaIn(t, s, admin, "mv", 0)
			t.Logf("future replica while copying: %d bytes, offset lag %d", f.Size, f.OffsetLag)
			// Asked again: a no-op success.
			if code := alterLogDir(t, admin, dest, "mv", 0)[0]; code != 0 {
				t.Errorf("the same move again: %v", kerr.ErrorForCode(code))
			}
			waitFor(t, "records acknowledged while the move is held", func() bool { return acked.Load() > before+500 })
			release()
		}
		moveStart := time.Now()
		waitFor(t, "the move done", func() bool {
			c, f := replicaIn(t, s, admin, "mv", 0)
			return c == dest && f == nil
		})
		t.Logf("move %d to %s: %v, %d records acknowledged during it", i, dest, time.Since(moveStart).Round(time.Millisecond), acked.Load()-before)
		waitFor(t, "the old copy and the move marker removed", func() bool {
			_, err := os.Stat(filepath.Join(cur, "mv-0"))
			_, err2 := os.Stat(filepath.Join(dest, "mv-0", moveMarkerFile))
			return os.IsNotExist(err) && os.IsNotExist(err2)
		})
		if ents, err := os.ReadDir(cur); err != nil {
			t.Fatal(err)
		} else {
			for _, e := range ents {
				if isFutureDirName(e.Name()) || e.Name() == "mv-0" {
					t.Errorf("left in %s after the move: %s", cur, e.Name())
				}
			}
		}
		cur = dest
		waitFor(t, "more records acknowledged", func() bool { return acked.Load() > before+1000 })
	}
	// The current directory asked for: a no-op success.
	if code := alterLogDir(t, admin, cur, "mv", 0)[0]; code != 0 {
		t.Errorf("move to the current directory: %v", kerr.ErrorForCode(code))
	}
	stop.Store(true)
	// Wait for the producer to stop, not for its buffer to be empty: it is
	// empty between two flushes too, and a record produced after that
	// would be acknowledged after total was read.
	select {
	case <-produced:
	case <-time.After(90 * time.Second):
		t.Fatalf("the producer did not stop: %d records buffered", prod.BufferedProduceRecords())
	}
	total := acked.Load()
	if failed.Load() != 0 {
		t.Errorf("%d records failed", failed.Load())
	}
	waitFor(t, "every acknowledged record read", func() bool {
		readMu.Lock()
		defer readMu.Unlock()
		return int64(len(read)) >= total
	})
	cancelConsume()
	wg.Wait()
	select {
	case err := <-readErr:
		t.Errorf("consumer: %v", err)
	default:
	}
	checkSequence(t, read, total)
	t.Logf("%d records produced and read in order through %d moves", total, moves)

	// The files are where the last move put them, and after a restart
	// all of it is read again.
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cur, "mv-0", "partition.metadata")); err != nil {
		t.Errorf("after the moves: %v", err)
	}
	s2 := startServer(t, props)
	cl2 := newClient(t, s2, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"mv": {0: kgo.NewOffset().AtStart()}}))
	var again []string
	poll.For(60*time.Second, func() bool {
		fs := cl2.PollFetches(testCtx(t))
		fs.EachRecord(func(r *kgo.Record) { again = append(again, string(r.Value)) })
		return int64(len(again)) >= total
	})
	checkSequence(t, again, total)
	if c, _ := replicaIn(t, s2, cl2, "mv", 0); c != cur {
		t.Errorf("after restart mv-0 is in %q, want %s", c, cur)
	}
}

// checkSequence checks that read holds values 0..n-1 once each, in order
// (the producer's values, "%09d-...").
func checkSequence(t *testing.T, read []string, n int64) {
	t.Helper()
	if int64(len(read)) != n {
		t.Errorf("read %d records, want %d", len(read), n)
	}
	for i, v := range read {
		got, err := strconv.Atoi(v[:9])
		if err != nil || got != i {
			t.Fatalf("record #%d is %q, want value %d (lost, duplicated or reordered)", i, v[:min(len(v), 20)], i)
		}
	}
}

// TestAlterReplicaLogDirsErrors: Kafka's error codes.
func TestAlterReplicaLogDirsErrors(t *testing.T) {
	d1, d2, d3 := t.TempDir(), t.TempDir(), t.TempDir()
	var fail3 atomic.Bool
	cfg := testConfig(t, map[string]string{"log.dirs": d1 + "," + d2 + "," + d3})
	cfg.LogOptions = []segment.Option{failingDirs(map[string]*atomic.Bool{d3: &fail3})}
	s := startServerConfig(t, cfg)
	cl := newClient(t, s)
	createTopic(t, cl, "e", 3, nil)
	for i := range int32(3) {
		produceRaw(t, cl, "e", i, buildBatch(t, segment.CodecNone, 2))
	}
	where := map[int32]string{}
	for _, d := range []string{d1, d2, d3} {
		for _, i := range partitionsIn(t, d, "e") {
			where[i] = d
		}
	}
	if got := alterLogDir(t, cl, filepath.Join(d1, "nope"), "e", 0)[0]; got != kerr.LogDirNotFound.Code {
		t.Errorf("unknown dir: %v", kerr.ErrorForCode(got))
	}
	if got := alterLogDir(t, cl, d1, "nope", 0)[0]; got != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %v", kerr.ErrorForCode(got))
	}
	if got := alterLogDir(t, cl, d1, "e", 7)[7]; got != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown partition: %v", kerr.ErrorForCode(got))
	}
	// The directory it is in: success, nothing moves.
	if got := alterLogDir(t, cl, where[0], "e", 0)[0]; got != 0 {
		t.Errorf("current dir: %v", kerr.ErrorForCode(got))
	}
	if p := s.topic("e").local(0); p.futureReplica() != nil || p.logDir().path != where[0] {
		t.Errorf("a move to the current directory started a move")
	}
	// A path given with a trailing separator and a "." names the same
	// directory.
	if got := alterLogDir(t, cl, where[0]+"/./", "e", 0)[0]; got != 0 {
		t.Errorf("current dir, other spelling: %v", kerr.ErrorForCode(got))
	}

	// d3 fails: a move to it is KAFKA_STORAGE_ERROR, and so is any move
	// while a directory is offline (Kafka), and a move of a replica in it.
	var in3 int32 = -1
	for i, d := range where {
		if d == d3 {
			in3 = i
		}
	}
	if in3 < 0 {
		t.Fatalf("no partition in %s: %v", d3, where)
	}
	fail3.Store(true)
	produceRaw(t, cl, "e", in3, buildBatch(t, segment.CodecNone, 1))
	waitFor(t, "d3 offline", func() bool { return len(s.dirs.online()) == 2 })
	var in1 int32 = -1 // a replica not in d3
	for i, d := range where {
		if d != d3 {
			in1 = i
		}
	}
	if in1 < 0 {
		t.Fatalf("every partition in %s: %v", d3, where)
	}
	if got := alterLogDir(t, cl, d3, "e", in1)[in1]; got != kerr.KafkaStorageError.Code {
		t.Errorf("to an offline dir: %v", kerr.ErrorForCode(got))
	}
	to := map[string]string{d1: d2, d2: d1}[where[in1]]
	if got := alterLogDir(t, cl, to, "e", in1)[in1]; got != kerr.KafkaStorageError.Code {
		t.Errorf("with a directory offline: %v", kerr.ErrorForCode(got))
	}
	waitFor(t, "e's replica in d3 offline", func() bool { return s.offlineError("e", in3) != nil })
	if got := alterLogDir(t, cl, d1, "e", in3)[in3]; got != kerr.KafkaStorageError.Code {
		t.Errorf("an offline replica: %v", kerr.ErrorForCode(got))
	}
}

// TestAlterReplicaLogDirsInterrupted: a broker stopping at each step of
// a move (its directories copied as the step left them on disk, which is
// what a kill -9 there leaves: every file the move wrote is fsynced
// before the next step) starts with the partition whole in one place:
// the old copy before the switch, the new copy after it, every record
// acknowledged before the stop there, and nothing of the move left.
func TestAlterReplicaLogDirsInterrupted(t *testing.T) {
	for _, point := range []string{"copying", "copied", "renamed", "switched"} {
		t.Run(point, func(t *testing.T) {
			d1, d2 := t.TempDir(), t.TempDir()
			s := startServer(t, map[string]string{"log.dirs": d1 + "," + d2})
			cl := newClient(t, s)
			createTopic(t, cl, "crash", 1, map[string]string{"segment.bytes": "4096"})
			for range 40 {
				if r := produceRaw(t, cl, "crash", 0, buildBatch(t, segment.CodecNone, 10)); r.ErrorCode != 0 {
					t.Fatalf("produce: %v", kerr.ErrorForCode(r.ErrorCode))
				}
			}
			src, _ := replicaIn(t, s, cl, "crash", 0)
			dest := map[string]string{d1: d2, d2: d1}[src]
			snap1, snap2 := t.TempDir(), t.TempDir()
			taken := make(chan struct{})
			s.testMoveHook = func(p, stage string) {
				if p != point {
					return
				}
				// The disk as this step leaves it: both directories.
				copyTree(t, d1, snap1)
				copyTree(t, d2, snap2)
				close(taken)
			}
			if code := alterLogDir(t, cl, dest, "crash", 0)[0]; code != 0 {
				t.Fatalf("move: %v", kerr.ErrorForCode(code))
			}
			select {
			case <-taken:
			case <-time.After(60 * time.Second):
				t.Fatal("the move did not reach " + point)
			}
			if err := s.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{".lock"} {
				_ = os.Remove(filepath.Join(snap1, f))
				_ = os.Remove(filepath.Join(snap2, f))
			}
			s2 := startServer(t, map[string]string{"log.dirs": snap1 + "," + snap2})
			cl2 := newClient(t, s2)
			fr := fetchRaw(t, cl2, "crash", 0, 0, 1<<24)
			if fr.ErrorCode != 0 || fr.HighWatermark != 400 {
				t.Errorf("after a stop at %s: error %v, high watermark %d, want 400", point, kerr.ErrorForCode(fr.ErrorCode), fr.HighWatermark)
			}
			n := 0
			if err := segment.SplitBatches(fr.RecordBatches, func(h segment.Header, _ []byte) error {
				n += int(h.RecordCount)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if n < 400 {
				t.Errorf("read %d records, want 400", n)
			}
			cur, fut := replicaIn(t, s2, cl2, "crash", 0)
			wantIn := map[bool]string{false: snap1, true: snap2} // where the snapshot of src or dest is
			srcSnap, destSnap := wantIn[src == d2], wantIn[dest == d2]
			want := srcSnap
			if point == "renamed" || point == "switched" {
				want = destSnap
			}
			if cur != want || fut != nil {
				t.Errorf("after a stop at %s: replica in %s (future %v), want %s", point, cur, fut, want)
			}
			for _, d := range []string{snap1, snap2} {
				ents, _ := os.ReadDir(d)
				for _, e := range ents {
					if isFutureDirName(e.Name()) || (e.Name() == "crash-0" && d != want) {
						t.Errorf("left after the restart in %s: %s", d, e.Name())
					}
				}
			}
			if _, err := os.Stat(filepath.Join(want, "crash-0", moveMarkerFile)); !os.IsNotExist(err) {
				t.Errorf("move marker left: %v", err)
			}
		})
	}
}

// copyTree copies the regular files and directories under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
