package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDiskFull runs a broker with two log directories, the second on a
// disk that fills up: a 48 MiB tmpfs the test mounts, part of it taken by
// a filler file. A producer writes to a topic in that directory until the
// broker refuses; the directory goes offline (ENOSPC is a disk failure,
// as in Kafka) and the broker stays up, serving the topic in its other
// directory. Then the filler is removed and the broker restarted: every
// acknowledged record is there exactly once, in order, and produce works
// again. Mounting needs root (CI runs as root); the test is skipped
// otherwise, and fails in CI.
func TestDiskFull(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	if os.Geteuid() != 0 {
		skipOrFailInCI(t, "needs root to mount a small tmpfs as the broker's disk")
	}
	disk := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", disk).CombinedOutput(); err != nil {
		skipOrFailInCI(t, fmt.Sprintf("cannot mount a tmpfs (%v: %s)", err, strings.TrimSpace(string(out))))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", disk).Run() })
	filler := filepath.Join(disk, "filler")
	if err := os.WriteFile(filler, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}

	spare, full := t.TempDir(), filepath.Join(disk, "data")
	b := StartBroker(t, "log.dirs="+spare+","+full, "log.segment.bytes=4194304",
		"offsets.topic.num.partitions=1", "num.partitions=1")
	// Two topics of one partition each: the broker puts them in
	// different directories (the one with fewer partitions first).
	admCl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	for _, name := range []string{"full", "other"} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		resp, err := kadm.NewClient(admCl).CreateTopic(ctx, 1, 1, nil, name)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	topic, other := "full", "other"
	if _, err := os.Stat(filepath.Join(full, topic+"-0")); err != nil {
		topic, other = other, topic
	}
	if _, err := os.Stat(filepath.Join(full, topic+"-0")); err != nil {
		t.Fatalf("neither topic placed on the small disk: %v", err)
	}
	if _, err := os.Stat(filepath.Join(spare, other+"-0")); err != nil {
		t.Fatalf("%s not placed in the other directory: %v", other, err)
	}
	otherAcked := produceValues(t, b.Addr, other, "oth-0000001", "oth-0000002")
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(5*time.Second), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// Produce 1 KiB records in rounds of 200 until the broker refuses
	// (bounded: 60 MB, more than the disk holds, and 90 s).
	// Values do not compress (the producer does not compress either), so
	// each takes its kilobyte on the disk.
	value := func(i int) []byte {
		v := fmt.Appendf(make([]byte, 0, 1032), "rec-%07d-", i)
		r := rand.New(rand.NewPCG(uint64(i), 1))
		for len(v) < 1024 {
			v = binary.LittleEndian.AppendUint64(v, r.Uint64())
		}
		return v[:1024]
	}
	var acked []string
	var refusal error
	deadline := time.Now().Add(90 * time.Second)
	for next := 0; next < 60000 && refusal == nil && time.Now().Before(deadline); {
		recs := make([]*kgo.Record, 200)
		for i := range recs {
			recs[i] = &kgo.Record{Value: value(next + i)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		res := cl.ProduceSync(ctx, recs...)
		cancel()
		for _, r := range res {
			if r.Err == nil {
				acked = append(acked, string(r.Record.Value[:11]))
			} else if refusal == nil {
				refusal = r.Err
			}
		}
		next += len(recs)
	}
	if out, err := exec.Command("df", "-k", disk).CombinedOutput(); err == nil {
		t.Logf("after producing:\n%s", out)
	}
	if refusal == nil {
		t.Fatalf("the broker acknowledged %d records (%d MiB) on a 40 MiB disk without refusing any", len(acked), len(acked)>>10)
	}
	t.Logf("disk full after %d acknowledged records: produce refused with %v", len(acked), refusal)
	b.RequireAlive(t)
	if line := lineWith(b.Output(), "log directory offline: its partitions"); !strings.Contains(line, "no space left on device") || !strings.Contains(line, full) {
		t.Errorf("the broker did not log the full directory and the cause (no space left on device):\n%s", b.Output())
	}
	// The other directory keeps serving, reads and writes.
	otherAcked = append(otherAcked, produceValues(t, b.Addr, other, "oth-0000003")...)
	checkAcked(t, b.Addr, other, otherAcked, "the other directory, with the disk full")

	// Room again, and a restart: everything acknowledged is still there and
	// produce works.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	b.Kill(t)
	b.Restart(t)
	checkAcked(t, b.Addr, topic, acked, "after the restart")
	checkAcked(t, b.Addr, other, otherAcked, "the other directory, after the restart")
	cl2, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl2.ProduceSync(ctx, &kgo.Record{Value: value(9999999)}).FirstErr(); err != nil {
		t.Fatalf("produce after the restart with free space: %v", err)
	}
	checkAcked(t, b.Addr, topic, append(acked, "rec-9999999"), "after producing again")
}

// checkAcked reads the topic's single partition from the start and fails
// unless its records are exactly want (value prefixes), in order: nothing
// acknowledged lost, nothing duplicated.
func checkAcked(t *testing.T, addr, topic string, want []string, when string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: read %d of %d acknowledged records: %v", when, len(got), len(want), err)
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("%s: fetch: %v", when, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value[:min(11, len(r.Value))])) })
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: record %d is %q, want %q", when, i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", when, len(got), len(want))
	}
}

// produceValues produces each value to topic (created if need be) and returns
// the 11-byte prefixes that checkAcked compares, failing the test on any
// error.
func produceValues(t *testing.T, addr, topic string, values ...string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []string
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %q to %s: %v", v, topic, err)
		}
		out = append(out, v[:min(11, len(v))])
	}
	return out
}
