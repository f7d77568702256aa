package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// failingDisk is a real block device that can be made to fail: an ext4
// file system on a loop device whose backing file is sparse, on a small
// tmpfs. Filling the tmpfs makes every write of a block the file system
// has not written before fail in the loop driver; the kernel reports it
// ("Buffer I/O error on device loopN") and fsync returns the error. (The
// kernel here has no device-mapper, whose error target would be the
// usual tool.)
type failingDisk struct {
	// Mount is where the file system is mounted.
	Mount  string
	back   string
	filler string
}

// newFailingDisk mounts a failing disk for the test, unmounted at its
// end. It needs root, losetup and mkfs.ext4: the test is skipped without
// them, and fails in CI.
func newFailingDisk(t *testing.T) *failingDisk {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFailInCI(t, "needs root to set up a loop device")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFailInCI(t, tool+" is not installed (util-linux, e2fsprogs)")
		}
	}
	run := func(name string, args ...string) (string, error) {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return strings.TrimSpace(string(out)), nil
	}
	root := t.TempDir()
	d := &failingDisk{Mount: filepath.Join(root, "mnt"), back: filepath.Join(root, "back")}
	d.filler = filepath.Join(d.back, "filler")
	for _, p := range []string{d.Mount, d.back} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := run("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", d.back); err != nil {
		skipOrFailInCI(t, "cannot mount a tmpfs: "+err.Error())
	}
	t.Cleanup(func() { _, _ = run("umount", "-l", d.back) })
	img := filepath.Join(d.back, "disk.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 512<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1,lazy_journal_init=1", img); err != nil {
		t.Fatal(err)
	}
	var dev string
	var err error
	tries := 0 // another test may take the free device first
	poll.For(time.Minute, func() bool {
		tries++
		dev, err = run("losetup", "-f", "--show", img)
		return err == nil || tries >= 3
	})
	if err != nil {
		skipOrFailInCI(t, "cannot set up a loop device: "+err.Error())
	}
	t.Cleanup(func() { _, _ = run("losetup", "-d", dev) })
	if _, err := run("mount", dev, d.Mount); err != nil {
		skipOrFailInCI(t, "cannot mount the loop device: "+err.Error())
	}
	t.Cleanup(func() { _, _ = run("umount", "-l", d.Mount) })
	return d
}

// fail fills the backing tmpfs: from now on the disk cannot write a new
// block.
func (d *failingDisk) fail(t *testing.T) {
	t.Helper()
	f, err := os.Create(d.filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for range 128 { // the tmpfs holds 64 MiB: bounded
		if _, err := f.Write(buf); err != nil {
			return // full
		}
	}
	t.Fatal("the backing tmpfs did not fill up")
}

// scrapeText returns the Prometheus text of a metrics endpoint.
func scrapeText(addr string) (string, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestLogDirFailureCluster: three brokers, a topic with RF 3; broker 3
// has two log directories, one of them on a disk that fails under an
// acks=all load. Broker 3 takes that directory offline and tells the
// controller: its replicas there leave the ISR and lose leadership, the
// producer goes on through the other brokers, and broker 3 keeps serving
// from its other directory. The history checker finds nothing lost,
// duplicated or inconsistent.
func TestLogDirFailureCluster(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	disk := newFailingDisk(t)
	const topic = "jbod"
	const nparts = 6

	c := &Cluster{ZK: zktest.Start(t)}
	c.Connect = c.ZK.ConnectString("/strata")
	metricsAddr := freeAddr(t)
	goodDir, badDir := t.TempDir(), filepath.Join(disk.Mount, "data")
	for id := 1; id <= 3; id++ {
		var extra []string
		if id == 3 {
			extra = []string{"log.dirs=" + goodDir + "," + badDir, "metrics.listener=" + metricsAddr,
				"log.flush.interval.ms=20"} // the failure shows at the next fsync
		}
		c.brokers = append(c.brokers, StartBroker(t, c.brokerOverrides(id, extra)...))
	}
	c.waitAllSee(t, 30*time.Second, 3)
	c.createTopicWith(t, topic, nparts, 3, map[string]string{"min.insync.replicas": "2"})
	// Broker 3 opens its replicas as it applies the metadata, which may
	// come after the topic shows in Metadata.
	var onBad, onGood []int32
	missing := ""
	if !poll.For(30*time.Second, func() bool {
		onBad, onGood, missing = nil, nil, ""
		for p := range int32(nparts) {
			name := fmt.Sprintf("%s-%d", topic, p)
			_, errBad := os.Stat(filepath.Join(badDir, name))
			_, errGood := os.Stat(filepath.Join(goodDir, name))
			switch {
			case errBad == nil && errGood == nil:
				t.Fatalf("%s in both directories", name)
			case errBad == nil:
				onBad = append(onBad, p)
			case errGood == nil:
				onGood = append(onGood, p)
			default:
				missing = name
				return false
			}
		}
		return true
	}) {
		t.Fatalf("%s in neither directory of broker 3", missing)
	}
	t.Logf("broker 3 placed %v on the failing disk, %v on the good one", onBad, onGood)
	if len(onBad) == 0 || len(onGood) == 0 {
		t.Fatalf("broker 3 did not spread the partitions over its directories: %v, %v", onBad, onGood)
	}

	all := make([]int32, nparts)
	for i := range all {
		all[i] = int32(i)
	}
	prod := c.startSeqProducer(t, topic, all, 10*time.Millisecond)
	prod.acks.waitAcks(t, all, time.Time{}, 20, 30*time.Second, "before the failure")

	failedAt := time.Now()
	disk.fail(t)
	b3 := c.Broker(3)
	var offlineAfter time.Duration
	if !poll.For(60*time.Second, func() bool {
		m, err := scrapeText(metricsAddr)
		return err == nil && strings.Contains(m, `strata_broker_log_dir_offline{dir="`+badDir+`"} 1`)
	}) {
		t.Fatalf("broker 3 did not report %s offline within 60s:\n%s", badDir, b3.Output())
	}
	offlineAfter = time.Since(failedAt)
	c.WaitMetadata(t, 60*time.Second, "broker 3 out of the partitions on its failed disk", func(md kadm.Metadata) string {
		for _, p := range onBad {
			d := md.Topics[topic].Partitions[p]
			if d.Leader == 3 || d.Leader < 0 || slices.Contains(d.ISR, 3) {
				return fmt.Sprintf("partition %d: leader %d, isr %v", p, d.Leader, d.ISR)
			}
		}
		return ""
	})
	movedAfter := time.Since(failedAt)
	prod.acks.waitAcks(t, all, time.Now(), 20, 60*time.Second, "after the failure")
	b3.RequireAlive(t)

	// Broker 3's good directory keeps serving: its replicas there stay
	// in the ISR, and it answers for what it leads.
	c.WaitMetadata(t, 30*time.Second, "broker 3 in the ISR of its healthy partitions", func(md kadm.Metadata) string {
		for _, p := range onGood {
			if d := md.Topics[topic].Partitions[p]; !slices.Contains(d.ISR, 3) {
				return fmt.Sprintf("partition %d: isr %v", p, d.ISR)
			}
		}
		return ""
	})
	m, err := scrapeText(metricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`strata_broker_log_dir_offline{dir="` + goodDir + `"} 0`, "strata_broker_offline_log_dirs 1"} {
		if !strings.Contains(m, want) {
			t.Errorf("broker 3's metrics lack %q", want)
		}
	}
	if line := lineWith(b3.Output(), "log directory offline: its partitions"); !strings.Contains(line, badDir) {
		t.Errorf("broker 3 did not log which directory failed")
	} else {
		t.Logf("broker 3: %s", line)
	}

	sent := prod.stop(t)
	logs := c.readLog(t, topic, all)
	hist := history.New()
	addProduces(hist, "franz-go", topic, sent)
	rep := hist.Check(finalLog(topic, logs))
	t.Logf("LOGDIR_FAILURE offline_after_ms=%d leadership_moved_after_ms=%d partitions_on_failed_disk=%d history: %s",
		offlineAfter.Milliseconds(), movedAfter.Milliseconds(), len(onBad), rep)
	if !rep.OK() || rep.Lost+rep.Inconsistent+rep.Duplicated != 0 {
		t.Errorf("the history checker found %s; first problems:\n%s", rep, strings.Join(rep.Problems, "\n"))
	}
	if rep.Acknowledged == 0 {
		t.Error("nothing was acknowledged")
	}
	errs := failedErrors(sent)
	t.Logf("produce errors the client saw (retried): %v", errs)
}

// lineWith returns the first line of out that contains sub, or "".
func lineWith(out, sub string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestDamagedFilesRestart: the checkpoint files of one partition of a
// stopped broker are overwritten with garbage, and the partition.metadata
// of another. At restart the checkpoints are rebuilt from the log (every
// acknowledged record is there once, in order, and produce goes on); the
// partition whose topic id is unreadable is offline, with the file named
// in the log, and answers KAFKA_STORAGE_ERROR; the broker stays up.
func TestDamagedFilesRestart(t *testing.T) {
	b := StartBroker(t, "num.partitions=1", "offsets.topic.num.partitions=1")
	const ckpt, meta = "ckpt", "meta"
	acked := produceValues(t, b.Addr, ckpt, "rec-0000001", "rec-0000002", "rec-0000003")
	produceValues(t, b.Addr, meta, "rec-0000001")
	b.Stop(t)

	garbage := []byte("\x00\x00garbage\n")
	for _, f := range []string{"leader-epoch-checkpoint", "replication-offset-checkpoint",
		"log-start-offset-checkpoint", "recovery-point-offset-checkpoint"} {
		if err := os.WriteFile(filepath.Join(b.Dir, ckpt+"-0", f), garbage, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	badMeta := filepath.Join(b.Dir, meta+"-0", "partition.metadata")
	if err := os.WriteFile(badMeta, []byte("version: 0\ntopic_id: !!!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Restart(t)
	checkAcked(t, b.Addr, ckpt, acked, "after the checkpoints were rebuilt")
	acked = append(acked, produceValues(t, b.Addr, ckpt, "rec-0000004")...)
	checkAcked(t, b.Addr, ckpt, acked, "after producing again")
	if out := b.Output(); !strings.Contains(out, "rebuilding a checkpoint") || !strings.Contains(lineWith(out, "partition offline: a file of it is damaged"), badMeta) {
		t.Errorf("the broker did not log the rebuilt checkpoints and the damaged file %s:\n%s", badMeta, out)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var lastErr error
	if !poll.For(20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, meta)
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) { err = o.Err })
		}
		lastErr = err
		return errors.Is(err, kerr.KafkaStorageError) || errors.Is(err, kerr.LeaderNotAvailable)
	}) {
		t.Errorf("the partition with a damaged partition.metadata: %v, want KAFKA_STORAGE_ERROR (or no leader, once the controller took it offline)", lastErr)
	}
	b.RequireAlive(t)
}
