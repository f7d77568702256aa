package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/stratastream/strata/segment"
)

// logBytesOnDisk sums the sizes of the .log files in a partition
// directory.
func logBytesOnDisk(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), segment.LogSuffix) {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
	}
	return n
}

// TestDescribeLogDirs: a broker with two log directories and a topic's
// partitions in both; kadm's DescribeAllLogDirs and DescribeBrokerLogDirs
// see each directory by its absolute path, every partition in the
// directory that holds it with the size of its .log files on disk, the
// file system's sizes; a listed partition that does not exist is left
// out; v0 and v3 answer the same; a failed directory is
// KAFKA_STORAGE_ERROR while the other is still described.
func TestDescribeLogDirs(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	var fail2 atomic.Bool
	cfg := testConfig(t, map[string]string{"log.dirs": d1 + "," + d2})
	cfg.LogOptions = []segment.Option{failingDirs(map[string]*atomic.Bool{d2: &fail2})}
	s := startServerConfig(t, cfg)
	cl := newClient(t, s)
	adm := kadm.NewClient(cl)
	createTopic(t, cl, "ld", 4, map[string]string{"segment.bytes": "1024"})
	for i := range int32(4) {
		for range int(i) * 3 { // partition i gets 3i batches: sizes differ, some roll
			if r := produceRaw(t, cl, "ld", i, buildBatch(t, segment.CodecNone, 5)); r.ErrorCode != 0 {
				t.Fatalf("produce to %d: %v", i, kerr.ErrorForCode(r.ErrorCode))
			}
		}
	}
	where := map[int32]string{}
	for _, d := range []string{d1, d2} {
		for _, i := range partitionsIn(t, d, "ld") {
			where[i] = d
		}
	}
	if len(partitionsIn(t, d1, "ld")) == 0 || len(partitionsIn(t, d2, "ld")) == 0 {
		t.Fatalf("partitions not in both directories: %v", where)
	}

	all, err := adm.DescribeAllLogDirs(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs := all[s.cfg.BrokerID]
	if len(dirs) != 2 {
		t.Fatalf("described %d directories, want 2: %v", len(dirs), dirs)
	}
	for _, d := range []string{d1, d2} {
		ld, ok := dirs[d] // t.TempDir is absolute
		if !ok || ld.Err != nil {
			t.Fatalf("directory %s: described %v, error %v", d, ok, ld.Err)
		}
		if ld.TotalBytes <= 0 || ld.UsableBytes < 0 || ld.UsableBytes > ld.TotalBytes {
			t.Errorf("%s: total %d, usable %d bytes", d, ld.TotalBytes, ld.UsableBytes)
		}
		if _, ok := ld.Topics["__consumer_offsets"]; !ok && len(partitionsIn(t, d, "__consumer_offsets")) > 0 {
			t.Errorf("%s: __consumer_offsets not described with every partition asked for", d)
		}
	}
	for i, d := range where {
		for _, other := range []string{d1, d2} {
			p, ok := dirs[other].Topics.Lookup("ld", i)
			if other != d {
				if ok {
					t.Errorf("partition %d described in %s too", i, other)
				}
				continue
			}
			onDisk := logBytesOnDisk(t, filepath.Join(d, segment.PartitionDirName("ld", i)))
			if !ok || p.Size != onDisk || p.OffsetLag != 0 || p.IsFuture {
				t.Errorf("partition %d in %s: described %v %+v, want size %d (on disk), lag 0, current", i, d, ok, p, onDisk)
			}
			if i > 0 && onDisk == 0 {
				t.Errorf("partition %d has no bytes on disk", i)
			}
		}
	}

	// Some partitions: ld-1, ld-3 and ld-9 (no such partition), a topic
	// that does not exist.
	var ts kadm.TopicsSet
	ts.Add("ld", 1, 3, 9)
	ts.Add("nope", 0)
	some, err := adm.DescribeBrokerLogDirs(testCtx(t), s.cfg.BrokerID, ts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	some.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			got = append(got, fmt.Sprintf("%s-%d@%s", p.Topic, p.Partition, d.Dir))
		})
	})
	if len(got) != 2 || !strings.Contains(strings.Join(got, " "), "ld-1@"+where[1]) || !strings.Contains(strings.Join(got, " "), "ld-3@"+where[3]) {
		t.Errorf("described %v, want ld-1 in %s and ld-3 in %s only", got, where[1], where[3])
	}

	// v0 (no top-level error, no sizes of the file system) and v3.
	for _, v := range []int16{0, 3} {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.Version = v
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic, rt.Partitions = "ld", []int32{2}
		req.Topics = append(req.Topics, rt)
		resp := dialRaw(t, s).request(1, req).(*kmsg.DescribeLogDirsResponse)
		n := 0
		for _, d := range resp.Dirs {
			for _, tp := range d.Topics {
				for _, p := range tp.Partitions {
					n++
					if d.Dir != where[2] || tp.Topic != "ld" || p.Partition != 2 || p.Size != logBytesOnDisk(t, filepath.Join(where[2], "ld-2")) {
						t.Errorf("v%d: %s %s-%d size %d", v, d.Dir, tp.Topic, p.Partition, p.Size)
					}
				}
			}
		}
		if resp.ErrorCode != 0 || len(resp.Dirs) != 2 || n != 1 {
			t.Errorf("v%d: error %d, %d directories, %d partitions; want 0, 2, 1", v, resp.ErrorCode, len(resp.Dirs), n)
		}
	}

	// d2's disk fails: it is described as KAFKA_STORAGE_ERROR, d1 still
	// with its partitions.
	fail2.Store(true)
	var bad int32 = -1
	for i, d := range where {
		if d == d2 {
			bad = i
		}
	}
	produceRaw(t, cl, "ld", bad, buildBatch(t, segment.CodecNone, 1))
	waitFor(t, "d2 offline", func() bool { return len(s.dirs.online()) == 1 })
	dirs, err = adm.DescribeBrokerLogDirs(testCtx(t), s.cfg.BrokerID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ld := dirs[d2]; !errors.Is(ld.Err, kerr.KafkaStorageError) || len(ld.Topics) != 0 {
		t.Errorf("failed directory: error %v, %d topics; want KAFKA_STORAGE_ERROR and none", ld.Err, len(ld.Topics))
	}
	if ld := dirs[d1]; ld.Err != nil || len(ld.Topics["ld"]) != len(partitionsIn(t, d1, "ld")) {
		t.Errorf("healthy directory: error %v, %d partitions of ld; want %d", ld.Err, len(ld.Topics["ld"]), len(partitionsIn(t, d1, "ld")))
	}
}

// TestDescribeLogDirsDeniedOldVersion: without DESCRIBE on the cluster,
// v0-v2 (no top-level error) answer no directories; v3+ say
// CLUSTER_AUTHORIZATION_FAILED (the ACL matrix checks that one too).
func TestDescribeLogDirsDeniedOldVersion(t *testing.T) {
	s := startServer(t, authzSASLProps([]string{"nobody"}, nil))
	for _, v := range []int16{0, 2, 3, 4} {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(35, v)
		cl := plainClient(t, s, "nobody", kgo.MaxVersions(vs))
		resp, err := cl.Broker(int(s.cfg.BrokerID)).Request(testCtx(t), kmsg.NewPtrDescribeLogDirsRequest())
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.DescribeLogDirsResponse)
		want := int16(0)
		if v >= 3 {
			want = kerr.ClusterAuthorizationFailed.Code
		}
		if r.Version != v || r.ErrorCode != want || len(r.Dirs) != 0 {
			t.Errorf("v%d (answered as v%d): error %v, %d directories; want %v and none", v, r.Version, kerr.ErrorForCode(r.ErrorCode), len(r.Dirs), kerr.ErrorForCode(want))
		}
	}
}
